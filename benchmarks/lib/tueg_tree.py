"""A synthetic tree of EDF files laid out as TUEG lays them out, of a chosen size.

``tuh_eeg/v2.0.0/edf/<group>/<subject>/s<NNN>_<yyyy>_<mm>_<dd>/<montage>/
<subject>_s<NNN>_t<NNN>.edf``: subjects of eight letters in groups of folders named by
three digits, one to three sessions each, one to two files (tokens) a session, in the
three montage folders of TUEG (``01_tcp_ar``: channels ``EEG FP1-REF``...,
``02_tcp_le``: ``EEG FP1-LE``..., ``03_tcp_ar_a``: ``-REF`` without the ear
electrodes A1 and A2), at 250, 256, 400 or 512 Hz, with the 19 channels the readers
keep, some of TUEG's other channels (EEG T1/T2, the ear electrodes, EKG, photic
stimulation, EMG, ROC/LOC, the monitor's IBI/BURSTS/SUPPR) in varying sets, and
recordings of varying lengths. A few files are cut short (their header names more
data records than they hold), as some of TUEG's are, and fewer cut within their header,
which no reader opens (``store --on-error skip`` lists them).

The signal: per channel an alpha rhythm of random frequency, amplitude and phase over
1/f-like background noise, in microvolts, written as EDF's 16-bit integers. The files
are written with numpy (the EDF header, then one-second data records), so that
gigabytes take minutes.

``benchmarks/make_tueg_tree.py`` writes one from the command line; ``rehearsal_tueg``
makes its tree with it too.
"""

from __future__ import annotations

import json
import logging
import string
from pathlib import Path

import numpy as np

logger = logging.getLogger("make_tueg_tree")

#: The 19 channels the readers keep, in TUH's spelling.
CHANNELS_19 = ("FP1", "FP2", "F3", "F4", "F7", "F8", "FZ", "C3", "C4", "CZ", "P3", "P4",
               "PZ", "O1", "O2", "T3", "T4", "T5", "T6")  # fmt: skip
#: TUEG's other channels, some of which each file holds.
EXTRA_EEG = ("T1", "T2", "A1", "A2", "ROC", "LOC", "26", "27", "28", "29", "30")
OTHER = ("EKG1-REF", "PHOTIC-REF", "IBI", "BURSTS", "SUPPR", "EMG-REF")
MONTAGES = ("01_tcp_ar", "02_tcp_le", "03_tcp_ar_a")
SFREQS = (250, 256, 400, 512)
#: Physical range of the EEG channels written (microvolts) and its 16-bit coding.
PHYSICAL, DIGITAL = 3200.0, 32767


def _field(value, width):
    text = str(value)[:width]
    return text.ljust(width).encode("ascii")


def edf_header(labels, sfreq, n_records, patient, start="01.01.15", time="12.00.00"):
    """The bytes of an EDF header: ``labels`` at ``sfreq`` Hz, one-second records."""
    ns = len(labels)
    head = b"".join(
        [
            _field("0", 8),
            _field(f"{patient} M 01-JAN-1970 {patient} Age:45", 80),
            _field(f"Startdate 01-JAN-2015 {patient} TECH SYNTHETIC", 80),
            _field(start, 8),
            _field(time, 8),
            _field(256 * (ns + 1), 8),
            _field("", 44),
            _field(n_records, 8),
            _field(1, 8),
            _field(ns, 4),
        ]
    )
    fields = [
        [_field(label, 16) for label in labels],
        [_field("Unknown", 80)] * ns,
        [_field("uV", 8)] * ns,
        [_field(-PHYSICAL, 8)] * ns,
        [_field(PHYSICAL, 8)] * ns,
        [_field(-DIGITAL, 8)] * ns,
        [_field(DIGITAL, 8)] * ns,
        [_field("HP:0.000 Hz LP:0.0 Hz N:0.0", 80)] * ns,
        [_field(int(sfreq), 8)] * ns,
        [_field("", 32)] * ns,
    ]
    return head + b"".join(b"".join(f) for f in fields)


def eeg_signal(rng, n_chans, n_times, sfreq):
    """(n_chans, n_times) microvolts: alpha rhythms over 1/f-like noise."""
    t = np.arange(n_times) / sfreq
    freq = rng.uniform(8, 12, (n_chans, 1))
    amp = rng.uniform(5, 30, (n_chans, 1))
    phase = rng.uniform(0, 2 * np.pi, (n_chans, 1))
    white = rng.standard_normal((n_chans, n_times)).astype(np.float32)
    brown = np.cumsum(white, axis=1)
    brown -= np.linspace(0, 1, n_times, dtype=np.float32) * brown[:, -1:]  # no drift
    noise = 0.3 * brown + 10 * white
    return (amp * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32) + noise


def write_edf(path, labels, signal, sfreq, patient, truncate=None):
    """Write ``signal`` (n_chans, n_times, microvolts) as EDF; ``truncate``: keep only
    this share of the data records' bytes (the header still names them all), or with
    ``"header"`` only the first 200 bytes of the header (a file no reader opens)."""
    n_records = signal.shape[1] // int(sfreq)
    signal = signal[:, : n_records * int(sfreq)]
    digital = np.clip(np.round(signal * (DIGITAL / PHYSICAL)), -DIGITAL, DIGITAL)
    records = digital.astype("<i2").reshape(len(labels), n_records, int(sfreq))
    data = records.transpose(1, 0, 2).tobytes()  # record by record, signal by signal
    path.parent.mkdir(parents=True, exist_ok=True)
    header = edf_header(labels, sfreq, n_records, patient)
    with open(path, "wb") as f:
        if truncate == "header":
            f.write(header[:200])
        else:
            f.write(header)
            f.write(data if truncate is None else data[: int(len(data) * truncate)])
    return path.stat().st_size


def subject_name(i):
    """The i-th subject's eight letters: aaaaaaaa, aaaaaaab, ..."""
    letters = []
    for _ in range(8):
        i, r = divmod(i, 26)
        letters.append(string.ascii_lowercase[r])
    return "".join(reversed(letters))


def recording_plan(rng, minutes):
    """Montage, rate, channel labels and length of one recording."""
    montage = MONTAGES[rng.choice(3, p=[0.6, 0.25, 0.15])]
    sfreq = int(rng.choice(SFREQS, p=[0.5, 0.3, 0.1, 0.1]))
    suffix = "LE" if montage == "02_tcp_le" else "REF"
    extra = [c for c in EXTRA_EEG if rng.random() < 0.5]
    if montage == "03_tcp_ar_a":
        extra = [c for c in extra if c not in ("A1", "A2")]
    other = [c for c in OTHER if rng.random() < 0.5]
    eeg = list(CHANNELS_19) + extra
    order = rng.permutation(len(eeg))  # files list their channels in varying orders
    labels = [f"EEG {eeg[i]}-{suffix}" for i in order] + other
    seconds = int(rng.uniform(*minutes) * 60)
    return montage, sfreq, labels, seconds


def make_tree(out, gb, minutes=(5.0, 30.0), truncated=0.02, seed=0):
    """Write EDF files under ``out``/tuh_eeg/v2.0.0/edf until they hold ``gb`` GB.

    Returns
    -------
    summary : dict
        ``edf`` (the folder), ``files``, ``bytes``, ``truncated`` and ``unreadable``
    (the paths of the files cut in their data and in their header),
        ``subjects`` and the number of files per montage and per rate.
    """
    rng = np.random.default_rng(seed)
    edf = Path(out) / "tuh_eeg" / "v2.0.0" / "edf"
    total, files, cut, broken, subject = 0, 0, [], [], 0
    montages, rates = dict.fromkeys(MONTAGES, 0), dict.fromkeys(map(str, SFREQS), 0)
    target = gb * 1e9
    while total < target:
        name = subject_name(subject)
        group = f"{subject // 100:03d}"
        for session in range(1, int(rng.integers(1, 4)) + 1):
            montage, sfreq, labels, seconds = recording_plan(rng, minutes)
            folder = edf / group / name / f"s{session:03d}_2015_0{session}_1{session}" / montage
            for token in range(int(rng.integers(1, 3))):
                path = folder / f"{name}_s{session:03d}_t{token:03d}.edf"
                short = rng.random() < truncated or (files == 2 and not cut)
                header = not short and (rng.random() < truncated / 4 or (files == 4 and not broken))
                signal = eeg_signal(rng, len(labels), seconds * sfreq, sfreq)
                how = 0.6 if short else ("header" if header else None)
                total += write_edf(path, labels, signal, sfreq, name, how)
                files += 1
                montages[montage] += 1
                rates[str(sfreq)] += 1
                if short:
                    cut.append(str(path))
                if header:
                    broken.append(str(path))
                if total >= target:
                    break
            if total >= target:
                break
        subject += 1
        if subject % 20 == 0:
            logger.info("%d files, %.2f of %.2f GB", files, total / 1e9, gb)
    summary = {
        "edf": str(edf),
        "files": files,
        "bytes": total,
        "subjects": subject,
        "truncated": cut,
        "unreadable": broken,
        "montages": montages,
        "sfreqs": rates,
    }
    (Path(out) / "tree.json").write_text(json.dumps(summary, indent=1))
    return summary


def add_tree_arguments(parser, gb_help="size of the EDF files, GB"):
    """``--gb`` and ``--minutes``: the size of a tree and its recordings' lengths, as
    :func:`make_tree` takes them (``rehearsal_tueg`` makes its tree with them too)."""
    parser.add_argument("--gb", type=float, required=True, help=gb_help)
    parser.add_argument("--minutes", type=float, nargs=2, default=[5.0, 30.0],
        help="recording lengths")  # fmt: skip


def parse_tree_arguments(parser, argv):
    """``parser``'s arguments from ``argv``; a ``--gb`` not above 0 is refused."""
    args = parser.parse_args(argv)
    if args.gb <= 0:
        parser.error(f"--gb must be above 0, got {args.gb}")
    return args
