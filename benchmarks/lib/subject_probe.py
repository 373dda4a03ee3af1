"""The subject probe (FMScope's protocol) of frozen features: the data it reads, the
feature sets it compares, its scores and its table.

For every dataset and every set of frozen per-window features (log band power, each
shipped encoder, a random encoder of the same size), two linear probes of the package
(:mod:`braindecode_pars.pretraining.monitor`, the same that
:class:`~braindecode_pars.pretraining.ProbeMonitor` logs while an encoder pretrains):

- **subject identity**: trained on the first half of each recording, scored on the
  second half (temporal blocks, so that neighbouring windows do not leak); balanced
  accuracy, chance ``1 / n_subjects``;
- **the label across subjects**: grouped folds (no subject on both sides); balanced
  accuracy of the predictions pooled over the folds. On a dataset of one subject the
  groups are blocks of runs, and the subject probe is left out.

Both are a logistic regression (``C``) on features standardised on the training windows.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from benchmarks.lib.measure import table_head
from braindecode_pars import PatchEncoder, load_encoder
from braindecode_pars.datasets import load_bundled_eegmat, load_eegmat, load_physionet_mi
from braindecode_pars.features import BandPowerFeatures, EncoderFeatures
from braindecode_pars.hub import list_encoders
from braindecode_pars.io import read_windows
from braindecode_pars.pretraining.monitor import label_probe, subject_probe
from braindecode_pars.weights import DEFAULT_ENCODER

#: PhysioNet-MI's runs the probe reads: the imagery runs of the paper's 4-class task.
MI_RUNS = (4, 6, 8, 10, 12, 14)
#: The seed of the random encoder's initialisation.
RANDOM_SEED = 0


@dataclasses.dataclass
class ProbeData:
    """Windows and what the probes read of them.

    Attributes
    ----------
    name : str
        The dataset as the table names it.
    X : ndarray, shape (n_windows, n_chans, n_times)
        Each recording's windows in the order of time.
    y : ndarray
        The label of every window.
    subjects, recordings : ndarray
        The subject and the recording of every window.
    label_groups : ndarray
        The groups of the label probe's folds (subjects; blocks of runs for a dataset of
        one subject).
    label_across : str
        What those groups are, in words.
    sfreq : float
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    subjects: np.ndarray
    recordings: np.ndarray
    label_groups: np.ndarray
    label_across: str
    sfreq: float

    @property
    def n_subjects(self):
        return len(np.unique(self.subjects))


def _from_windows(name, windows, recording_column, label_column, label_across, max_windows):
    """:class:`ProbeData` of braindecode windows, at most ``max_windows`` of each recording
    (its first ones; None: all)."""
    meta = windows.get_metadata().reset_index(drop=True)
    subjects = meta["subject"].to_numpy()
    recordings = np.asarray(
        [f"{s}/{r}" for s, r in zip(subjects, meta[recording_column], strict=True)]
    )
    keep = np.ones(len(meta), dtype=bool)
    if max_windows is not None:
        rank = meta.groupby(recordings).cumcount().to_numpy()
        keep = rank < max_windows
    data = read_windows(windows)
    return ProbeData(
        name=name,
        X=np.asarray(data.X[keep], dtype=np.float32),
        y=np.asarray(data.y)[keep],
        subjects=subjects[keep],
        recordings=recordings[keep],
        label_groups=meta[label_column].to_numpy()[keep],
        label_across=label_across,
        sfreq=float(data.sfreq),
    )


def eegmat_bundled(subjects=None, max_windows=None):
    """The bundled EEGMAT windows (20 subjects, 10 s at 100 Hz, microvolts): rest (0)
    against mental arithmetic (1); each subject's two recordings, rest then arithmetic."""
    windows = load_bundled_eegmat(subjects=subjects)
    n = len(np.unique(windows.get_metadata()["subject"]))
    return _from_windows(
        f"EEGMAT, bundled ({n} subjects)", windows, "session", "subject", "subjects",
        max_windows,
    )  # fmt: skip


def eegmat_shared(path, subjects=None, max_windows=None):
    """EEGMAT from PhysioNet's files (``path``, 36 subjects by default), read by
    :func:`~braindecode_pars.datasets.load_eegmat` (10 s at 100 Hz, microvolts)."""
    windows = load_eegmat(path, subjects)
    n = len(np.unique(windows.get_metadata()["subject"]))
    return _from_windows(
        f"EEGMAT, PhysioNet files ({n} subjects)", windows, "session", "subject",
        "subjects", max_windows,
    )  # fmt: skip


def physionet_mi(path=None, runs=MI_RUNS):
    """PhysioNet-MI subject 1 (the one subject the project holds), imagined left fist,
    right fist, both fists and both feet, 4-s windows from each trial's onset at 100 Hz:
    one subject, so the label probe's groups are the blocks of runs."""
    windows = load_physionet_mi(runs=runs, path=path, window_seconds=4.0, sfreq=100.0)
    return _from_windows(
        "PhysioNet-MI S001, 4-class imagery", windows, "run", "block", "blocks of runs", None
    )


def random_encoder(like=DEFAULT_ENCODER, seed=RANDOM_SEED):
    """A new encoder of the settings and sampling rate of ``like``, initialised from
    ``seed`` (torch's global generator is left as it was)."""
    template = load_encoder(like)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return PatchEncoder.from_config(template.config, template.sfreq).eval()


def feature_sets(encoders=None, random_seed=RANDOM_SEED):
    """The frozen features compared, by the table's name: a function ``(X, sfreq) ->
    features`` each.

    Parameters
    ----------
    encoders : sequence of str | None
        Shipped encoders' names or saved encoders' folders (None: every shipped one,
        :func:`~braindecode_pars.hub.list_encoders`).
    random_seed : int
        The seed of the random encoder (of the default encoder's size).
    """
    sets = {"log band power": lambda X, sfreq: BandPowerFeatures(sfreq=sfreq).fit_transform(X)}
    for name in list_encoders() if encoders is None else encoders:
        sets[f"`{name}`"] = _encoder_features(name)
    size = load_encoder(DEFAULT_ENCODER)
    label = f"random encoder ({size.emb_dim} x {size.depth}, seed {random_seed})"
    sets[label] = _encoder_features(random_encoder(seed=random_seed))
    return sets


def _encoder_features(encoder):
    """``(X, sfreq) -> features`` of a frozen encoder (EncoderFeatures' default readout)."""

    def features(X, sfreq):
        return EncoderFeatures(encoder, sfreq=sfreq, batch_size=32).fit_transform(X)

    return features


def score(data, features, C=1.0, n_splits=5):
    """The probes of one feature set on one dataset.

    Parameters
    ----------
    data : ProbeData
    features : callable
        ``(X, sfreq) -> (n_windows, n_features)``.
    C : float
        The logistic regression's inverse penalty.
    n_splits : int
        Folds of the label probe (leave one group out when there are at most this many
        groups).

    Returns
    -------
    result : dict
        ``subject`` (None with one subject), ``label``, ``seconds``.
    """
    start = time.perf_counter()
    F = features(data.X, data.sfreq)
    subject = None
    if data.n_subjects >= 2:
        subject = subject_probe(F, data.subjects, data.recordings, C)
    label = label_probe(F, data.y, data.label_groups, n_splits, C)
    return {"subject": subject, "label": label, "seconds": time.perf_counter() - start}


def probe_table(datasets, sets, C=1.0, n_splits=5, log=None):
    """Every feature set scored on every dataset: rows ``{dataset, features, subject,
    label, seconds}``, datasets first."""
    rows = []
    for data in datasets:
        for name, features in sets.items():
            result = score(data, features, C, n_splits)
            rows.append({"dataset": data.name, "features": name, **result})
            if log is not None:
                log(rows[-1])
    return rows


def _cell(value):
    return "not measured" if value is None else f"{value:.3f}"


def report_lines(rows, datasets, *, command, machine, date, notes=()):
    """The Markdown report: one table per dataset (a row per feature set), then how it
    was measured."""
    lines = [
        "# Subject probe: what frozen features hold of the subject and of the label",
        "",
        f"Measured {date} on {machine}, by `{command}`.",
        "",
        "For each set of frozen per-window features, two linear probes (a logistic "
        "regression on features standardised on the training windows, the probes of "
        "`braindecode_pars.pretraining.monitor`, which `ProbeMonitor` logs during "
        "pretraining): **subject identity**, trained on the first half of each recording "
        "and scored on its second half (temporal blocks: neighbouring windows never on "
        "both sides), balanced accuracy; and **the label across subjects**, grouped folds "
        "(no subject on both sides), balanced accuracy of the predictions pooled over the "
        "folds. Encoder features are each channel's tokens averaged over patches and their "
        "standard deviation (`EncoderFeatures`' default readout); band power is the log "
        "power of each channel in six bands (`BandPowerFeatures`).",
        "",
        "These numbers describe the feature sets; no setting is chosen from them (EEGMAT's "
        "rows hold its test subjects, and `pars-small-v2` was pretrained on 24 of its "
        "training subjects).",
    ]
    for data in datasets:
        chance_subject = f"{1 / data.n_subjects:.3f}" if data.n_subjects >= 2 else "-"
        n_classes = len(np.unique(data.y))
        lines += [
            "",
            f"## {data.name}",
            "",
            f"{len(data.X)} windows of {data.X.shape[1]} channels x "
            f"{data.X.shape[2] / data.sfreq:g} s at {data.sfreq:g} Hz, "
            f"{data.n_subjects} subject(s), {len(np.unique(data.recordings))} recordings; "
            f"the label across {data.label_across} "
            f"({len(np.unique(data.label_groups))} groups, {n_classes} classes).",
        ]
        if data.n_subjects < 2:
            lines.append(
                "One subject: the subject probe needs several, so only the label probe "
                f"runs here, across {data.label_across}."
            )
        lines += ["", *table_head("features", "subject identity", "label", "seconds")]
        for row in rows:
            if row["dataset"] == data.name:
                lines.append(
                    f"| {row['features']} | {_cell(row['subject'])} | {_cell(row['label'])} "
                    f"| {row['seconds']:.0f} |"
                )
        lines.append(f"| chance | {chance_subject} | {1 / n_classes:.3f} | |")
    if notes:
        lines += ["", *notes]
    return lines
