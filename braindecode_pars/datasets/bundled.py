"""The EEG the main job, the demo and the tests read: where it lives, how to fetch it,
and the bundled EEGMAT recordings.

Two sets of recordings, about 50 MB once unpacked, kept out of the installed package:

- PhysioNet-MI subject S001, all 14 runs, in MNE's ``eegbci`` layout
  (``MNE-eegbci-data/files/eegmmidb/1.0.0/S001/S001Rxx.edf`` and PhysioNet's
  ``.edf.event`` files), read by :func:`~braindecode_pars.datasets.load_physionet_mi`;
- ``eegmat_100hz.npz``, 20 EEGMAT subjects preprocessed to 100 Hz, read by
  :func:`load_bundled_eegmat`.

:func:`bundled_data_path` finds the folder holding them: the folder named by the
environment variable ``BRAINDECODE_PARS_DATA`` if it is set; else the repository's
``data/`` folder when the package runs from a checkout; else the user cache folder
(``pooch.os_cache("braindecode_pars")``), where :func:`fetch_bundled_data` puts them.
Every file's SHA-256 is in :data:`BUNDLED_DATA_FILES`; a fetched file that does not
match is refused.

The checkout keeps the 14 EDF runs xz-compressed (``S001Rxx.edf.xz``, 33 MB to 15 MB),
so that the tree stays small enough to travel to a GPU machine. A folder that holds
them so is unpacked on first use into ``unpacked/<version>/`` of the folder named by
``BRAINDECODE_PARS_UNPACKED`` (default: the user cache), each file checked against its
SHA-256 and renamed into place only then, so that processes unpacking at once (pytest-xdist
workers) each see whole files; the folder's other files are linked there (copied where
links fail).

The bundled EEGMAT recordings: 20 of EEGMAT's 36 subjects (the 12 test subjects and 8
of the training subjects, the pool of labelled subjects the main job draws from), both
sessions, the 19 EEG channels band-passed 0.3-45 Hz and resampled to 100 Hz (as
:func:`~braindecode_pars.datasets.eegmat.load_eegmat` does), stored in microvolts as
float16 in one compressed ``.npz`` file. :func:`load_bundled_eegmat` returns them as
braindecode windows, in microvolts as :func:`~braindecode_pars.datasets.load_eegmat`
gives them; :func:`write_eegmat_bundle` makes the file from PhysioNet's EDF files.

Licences (Open Data Commons Attribution License v1.0) and citations: ``data/README.md``
in the repository. EEGMAT: PhysioNet EEGMAT 1.0.0; Zyma I., Tukaev S., Seleznov I.,
Kiyono K., Popov A., Chernykh M., Shpenkov O. Electroencephalograms during Mental
Arithmetic Task Performance. Data 4(1):14, 2019; Goldberger A.L. et al. PhysioBank,
PhysioToolkit, and PhysioNet. Circulation 101(23):e215-e220, 2000.
"""

from __future__ import annotations

import hashlib
import logging
import lzma
import os
import shutil
import time
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars._util.atomic import atomic_path, atomic_write
from braindecode_pars.datasets.eegmat import (
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    _eegmat_preprocessors,
    _read_eegmat,
)
from braindecode_pars.io.windowing import windows_of

logger = logging.getLogger(__name__)

#: Environment variable naming a folder that holds the bundled files; it wins over the
#: checkout's ``data/`` folder and the cache.
DATA_ENV = "BRAINDECODE_PARS_DATA"
#: Environment variable naming the folder a compressed data folder is unpacked into
#: (default: the user cache folder).
UNPACK_ENV = "BRAINDECODE_PARS_UNPACKED"
#: PhysioNet's folder of EEG Motor Movement/Imagery 1.0.0, as MNE's eegbci loader reads it.
_PHYSIONET_MI_URL = "https://physionet.org/files/eegmmidb/1.0.0/"
#: The project's release assets of the bundled data: the EEGMAT bundle, which has no
#: public source (:func:`write_eegmat_bundle` makes it from PhysioNet's EEGMAT
#: files), and runs 1 and 2 of S001, which hold the first 60 of their 61 one-second
#: records and so differ from PhysioNet's files. Assets are flat: ``<url><file name>``.
_BUNDLED_DATA_URL = "https://github.com/braindecode/braindecode-pars/releases/download/data-v1/"

_EEGBCI = "MNE-eegbci-data/files/eegmmidb/1.0.0/"
_EEGMAT = "eegmat_100hz.npz"
#: Files that are not PhysioNet's bytes: fetched from ``base_url``, not ``physionet_url``.
_OWN = {_EEGMAT, _EEGBCI + "S001/S001R01.edf", _EEGBCI + "S001/S001R02.edf"}

#: Every bundled file (path relative to the data folder) and its SHA-256, computed from
#: the repository's ``data/`` folder.
BUNDLED_DATA_FILES = {
    _EEGMAT: "8d40f8c466f06ebf114969acc9adb6a9673567d876d6fde9b1f1dd6b6d6980b3",
    **{
        _EEGBCI + name: digest
        for name, digest in {
            "S001/S001R01.edf": "fd3634aace054ca9f7d180ac90f64873c818caf07b7efc33730866ef941cfb02",
            "S001/S001R02.edf": "66ab7ace7268e3d7455550884bfac827da8556fce5b6f4698d78de8800b5e631",
            "S001/S001R03.edf": "3427c8d01bff1380bc9ab9f27a35ece2af5dfadf3e291bbc05eb66e4dadbfe2e",
            "S001/S001R04.edf": "3d161f88e1c00632585287d2ce584c2bc0f08862438eb255ea8723e00fac693d",
            "S001/S001R05.edf": "8828f4b97931100af136cebf27838248b82f69cf359f7e6c3146a1970a8fb8d9",
            "S001/S001R06.edf": "5369364f2c4e81ca141679d6dd2ba6ece61c7eb53d7fae31241b308876e1b6b3",
            "S001/S001R07.edf": "6320a941815eb7a0bc632e32c07c88b6e2281a0e2f177e8f49e2d0a16231145c",
            "S001/S001R08.edf": "358fb5189220725141968ae285fbe9e3f36210b834ffba71d940af308e3aca68",
            "S001/S001R09.edf": "1b642457807be572c31e8bb56a936cbdb554507d66e25e242c9bd1b0c557c53c",
            "S001/S001R10.edf": "20de1c7746c2349d16bda5e9f1b0ac7b7ad1581102a2e30dd2ac422696f62fb1",
            "S001/S001R11.edf": "d5296b9232b0ad88b7022155cbcde618df44d4b0db046ce3bec54f8f8644207a",
            "S001/S001R12.edf": "2b281c9b687b4c4176e83251d74743721f2d6ebd76656a972a3b9c44d9d88cd5",
            "S001/S001R13.edf": "dde646236a13d846ca68ee71440f1fd38d818bc50a2f4804a29bcf0f773ad167",
            "S001/S001R14.edf": "2110c48e3106898e3dbca47e39b330637afd3d3b8bc2da3ba1e44f4ac1118137",
            "S001/S001R01.edf.event": (
                "98cfbe863896ed90aa76ff95ad4151ed3b02157854cfa6a974121fc123c109c0"
            ),
            "S001/S001R02.edf.event": (
                "98cfbe863896ed90aa76ff95ad4151ed3b02157854cfa6a974121fc123c109c0"
            ),
            "S001/S001R03.edf.event": (
                "ba934fef5794a278b361c657b30c7a254a5c2d10754a37f484373d779d37bf66"
            ),
            "S001/S001R04.edf.event": (
                "c81d77b099878d1d392e93aa7a18a46b936b690bad605aa84a652b2bd9cbff1d"
            ),
            "S001/S001R05.edf.event": (
                "53f4af70d71eafab6e0d5fabc2c8e8b73a48b4f21df8be00e2543cc640c12549"
            ),
            "S001/S001R06.edf.event": (
                "ea56fcb5af6dc22a09e6c52c6c50be06f5bf4722cba178188f67732c6ecd0395"
            ),
            "S001/S001R07.edf.event": (
                "92b3e8a6b67a6846154b1244f9044558257134f17b25840c7f71206ad195584e"
            ),
            "S001/S001R08.edf.event": (
                "ccd5cf82de626903ece23e339121ff7919b3c3788cf647b575cf08dbb0198ebd"
            ),
            "S001/S001R09.edf.event": (
                "e438579df1a078f089a8a64cd82e2e11cb94abbd724605c4705658e9cc2458fd"
            ),
            "S001/S001R10.edf.event": (
                "8162d74d19617d3dc613cc4d3505a1e143edecd3fb9c7901e255495cf94de0d1"
            ),
            "S001/S001R11.edf.event": (
                "8162d74d19617d3dc613cc4d3505a1e143edecd3fb9c7901e255495cf94de0d1"
            ),
            "S001/S001R12.edf.event": (
                "482ba145b4cf10d7d6dc91bf708cc14230ec2a86592562a3f6c187be5c9f3e9b"
            ),
            "S001/S001R13.edf.event": (
                "1513629f6e8e700394421b828869afdbd4e2ccdf8bdbed2127f75a42b2db3ff4"
            ),
            "S001/S001R14.edf.event": (
                "7e61f9359aba654d84b2ebabe218ba21c6b3f8c33a13e5b6c9c71df1e91cd112"
            ),
        }.items()
    },
}


def _checkout_data():
    """The repository's ``data/`` folder: two levels above this package's modules."""
    return Path(__file__).resolve().parents[2] / "data"


def _cache_data():
    """The user cache folder the fetch writes to by default."""
    import pooch

    return Path(pooch.os_cache("braindecode_pars"))


#: Files a data folder may hold xz-compressed (``<name>.xz``), as the checkout does: the
#: EDF runs (the ``.edf.event`` files are a few hundred bytes and stay as they are).
PACKED = frozenset(name for name in BUNDLED_DATA_FILES if name.endswith(".edf"))
_XZ = ".xz"
#: A name for this registry: the folder a compressed data folder is unpacked into, so that
#: files unpacked for another version of the registry are never taken for these.
_REGISTRY_KEY = hashlib.sha256(
    "".join(f"{name} {digest}\n" for name, digest in sorted(BUNDLED_DATA_FILES.items())).encode()
).hexdigest()[:16]


def _missing(folder, packed=False):
    """The bundled files (relative paths) that ``folder`` lacks; with ``packed``, a file of
    :data:`PACKED` held as ``<name>.xz`` counts as present."""
    folder = Path(folder)
    return [
        name
        for name in BUNDLED_DATA_FILES
        if not (folder / name).is_file()
        and not (packed and name in PACKED and (folder / (name + _XZ)).is_file())
    ]


def _unpack_root():
    """The folder a compressed data folder is unpacked into: ``BRAINDECODE_PARS_UNPACKED``
    if set, else the user cache folder; one subfolder per version of the registry."""
    return Path(os.environ.get(UNPACK_ENV) or _cache_data()) / "unpacked" / _REGISTRY_KEY


def _sha256_of(fileobj):
    digest = hashlib.sha256()
    for block in iter(lambda: fileobj.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def _place(source, target, name):
    """Put ``name`` from the data folder ``source`` at ``target / name``, checked.

    A packed file is decompressed to a temporary name beside the target, another file is
    linked there (a hard link, else a symbolic link, else a copy); the result's SHA-256
    must be the registered one before it is renamed into place
    (:func:`~braindecode_pars._util.atomic.atomic_path`), so that a process that finds
    the file finds it whole and verified.
    """
    dest = target / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest) as tmp:
        src = source / name
        if src.is_file():
            try:
                os.link(src, tmp)
            except OSError:
                try:
                    os.symlink(src.resolve(), tmp)
                except OSError:
                    shutil.copyfile(src, tmp)
            with open(tmp, "rb") as f:
                digest = _sha256_of(f)
        else:
            src = source / (name + _XZ)
            with lzma.open(src) as packed, open(tmp, "wb") as out:
                shutil.copyfileobj(packed, out, 1 << 20)
            with open(tmp, "rb") as f:
                digest = _sha256_of(f)
        if digest != BUNDLED_DATA_FILES[name]:
            raise ValueError(
                f"'{src}' does not hold the registered bundled file '{name}' (SHA-256 "
                f"{digest}, expected {BUNDLED_DATA_FILES[name]}). Restore the data folder "
                "(in a checkout: git checkout -- data/), or fetch the files with "
                "braindecode_pars.datasets.fetch_bundled_data()."
            )


def _unpacked(source):
    """``source`` itself if it holds every bundled file as it is, else the folder its
    compressed files are unpacked into (done here on first use, each file verified)."""
    source = Path(source)
    if not _missing(source):
        return source
    target = _unpack_root()
    todo = _missing(target)
    if todo:
        start = time.perf_counter()
        for name in todo:
            _place(source, target, name)
        logger.info(
            "Unpacked %d bundled files from %s into %s in %.1f s",
            len(todo),
            source,
            target,
            time.perf_counter() - start,
        )
    return target


def bundled_data_path():
    """Folder holding the bundled EEG (PhysioNet-MI S001 in MNE's layout, the EEGMAT file).

    Looked for, in this order: the folder named by the environment variable
    ``BRAINDECODE_PARS_DATA`` if it is set (and then nowhere else); the repository's
    ``data/`` folder when the package runs from a checkout; the user cache folder that
    :func:`fetch_bundled_data` fills by default. A folder that holds the EDF runs
    xz-compressed (``S001Rxx.edf.xz``, as the checkout does) is unpacked on first use
    into ``unpacked/<version>/`` under ``BRAINDECODE_PARS_UNPACKED`` (default: the user
    cache), and that folder is returned.

    Returns
    -------
    path : Path
        The folder; it holds every file of :data:`BUNDLED_DATA_FILES`, uncompressed.

    Raises
    ------
    FileNotFoundError
        If no such folder holds every file; the message says where it looked.
    ValueError
        If an unpacked file's SHA-256 is not the registered one; the message names it.
    """
    hint = (
        "Fetch them with braindecode_pars.datasets.fetch_bundled_data() (needs the "
        f"internet), or set {DATA_ENV} to a folder that holds them."
    )
    env = os.environ.get(DATA_ENV)
    if env:
        missing = _missing(env, packed=True)
        if missing:
            raise FileNotFoundError(
                f"The environment variable {DATA_ENV} names '{env}', which lacks "
                f"{len(missing)} of the {len(BUNDLED_DATA_FILES)} bundled files (first: "
                f"'{missing[0]}'). {hint}"
            )
        return _unpacked(env)
    looked = []
    for folder in (_checkout_data(), _cache_data()):
        if not _missing(folder, packed=True):
            return _unpacked(folder)
        looked.append(f"'{folder}'")
    raise FileNotFoundError(
        f"The bundled EEG (PhysioNet-MI S001, {_EEGMAT}) is in none of {', '.join(looked)}, "
        f"and {DATA_ENV} is not set. {hint}"
    )


def fetch_bundled_data(path=None, base_url=_BUNDLED_DATA_URL, physionet_url=_PHYSIONET_MI_URL):
    """Download the bundled EEG and check every file's SHA-256.

    PhysioNet-MI runs 3-14 of S001 and every run's ``.edf.event`` file come from
    PhysioNet, in the layout MNE's eegbci loader uses
    (``<physionet_url>S001/S001R03.edf``). Runs 1 and 2 (the first 60 of their 61
    one-second records, so not PhysioNet's bytes) and ``eegmat_100hz.npz`` (built by
    :func:`write_eegmat_bundle` from
    PhysioNet's EEGMAT files; it has no public source) come from the project's release
    assets, ``<base_url><file name>``. Files already present with the right checksum
    are not downloaded again.

    Parameters
    ----------
    path : str | Path | None
        Folder to write to, laid out as the repository's ``data/`` folder. Default: the
        folder named by ``BRAINDECODE_PARS_DATA`` if it is set, else the user cache
        folder (``pooch.os_cache("braindecode_pars")``); :func:`bundled_data_path`
        finds either.
    base_url : str
        Where the project's own files are (default :data:`_BUNDLED_DATA_URL`).
    physionet_url : str
        PhysioNet-MI's folder (default :data:`_PHYSIONET_MI_URL`).

    Returns
    -------
    path : Path
        The folder holding every file of :data:`BUNDLED_DATA_FILES`.

    Raises
    ------
    ValueError
        If a downloaded file's SHA-256 is not the registered one; the message names the
        file and the download is deleted.
    """
    import pooch

    for name, url in (("base_url", base_url), ("physionet_url", physionet_url)):
        if not isinstance(url, str) or not url.endswith("/"):
            raise ValueError(f"'{name}' must be a URL ending in '/', but got {url!r}.")
    if path is None:
        path = os.environ.get(DATA_ENV) or _cache_data()
    path = Path(path)
    urls = {
        name: (
            base_url + name.rpartition("/")[2]
            if name in _OWN
            else physionet_url + name.removeprefix(_EEGBCI)
        )
        for name in BUNDLED_DATA_FILES
    }
    registry = {name: f"sha256:{digest}" for name, digest in BUNDLED_DATA_FILES.items()}
    fetcher = pooch.create(path=path, base_url=base_url, registry=registry, urls=urls)
    logger.info("Fetching %d bundled files into %s", len(registry), path)
    for name in BUNDLED_DATA_FILES:
        try:
            fetcher.fetch(name)
        except ValueError as err:
            raise ValueError(f"Refused '{name}' from '{urls[name]}': {err}") from err
    return path


# -- the bundled EEGMAT recordings --------------------------------------------------------
#: The labelled pool of the main job: the first 8 training subjects.
BUNDLED_POOL_SUBJECTS = EEGMAT_TRAIN_SUBJECTS[:8]
BUNDLED_SUBJECTS = tuple(sorted(EEGMAT_TEST_SUBJECTS + BUNDLED_POOL_SUBJECTS))


def _bundled_eegmat_file():
    """Path of the bundled EEGMAT file, in the folder :func:`bundled_data_path` finds."""
    return bundled_data_path() / _EEGMAT


def write_eegmat_bundle(eegmat_path, out=None, subjects=BUNDLED_SUBJECTS, sfreq=100.0):
    """Preprocess EEGMAT EDF files and write them as the compact bundled file.

    Parameters
    ----------
    eegmat_path : str | Path
        The folder of PhysioNet's EEGMAT EDF files.
    out : str | Path | None
        The file to write (atomically: a reader never sees half of it); None: the
        bundled file of :func:`bundled_data_path`'s folder.
    subjects : sequence of int
        The subjects to bundle.
    sfreq : float
        The rate they are resampled to.

    Returns
    -------
    out : Path
        The file written.
    """
    dataset = _read_eegmat(eegmat_path, subjects)
    from braindecode.preprocessing import preprocess

    preprocess(dataset, _eegmat_preprocessors(sfreq))
    arrays, meta = {}, []
    for ds in dataset.datasets:
        d = ds.description
        key = f"s{int(d['subject']):02d}_{int(d['session'])}"
        arrays[key] = (ds.raw.get_data() * 1e6).astype(np.float16)  # microvolts
        meta.append((int(d["subject"]), int(d["session"]), int(d["count_quality"])))
    first = dataset.datasets[0].raw
    out = Path(out) if out is not None else _bundled_eegmat_file()
    with atomic_write(out, "wb") as f:
        np.savez_compressed(
            f,
            ch_names=np.array(first.ch_names),
            sfreq=np.array(sfreq),
            meta=np.array(meta, dtype=np.int64),
            **arrays,
        )
    return out


def _read_bundled_eegmat(subjects=None, path=None):
    """The bundled recordings as a braindecode dataset of raws (microvolts, 100 Hz)."""
    path = _bundled_eegmat_file() if path is None else Path(path)
    with np.load(path) as f:
        ch_names = [str(c) for c in f["ch_names"]]
        sfreq = float(f["sfreq"])
        meta = f["meta"]
        wanted = set(BUNDLED_SUBJECTS if subjects is None else np.atleast_1d(subjects).tolist())
        missing = sorted(wanted - {int(m[0]) for m in meta})
        if missing:
            raise ValueError(
                f"Subjects {missing} are not bundled; the bundle holds {list(BUNDLED_SUBJECTS)} "
                "(use load_eegmat on PhysioNet's files for the others)."
            )
        datasets = []
        for subject, session, quality in meta:
            if int(subject) not in wanted:
                continue
            data = f[f"s{int(subject):02d}_{int(session)}"].astype(np.float64)  # microvolts
            info = mne.create_info(ch_names, sfreq, ch_types="eeg")
            raw = mne.io.RawArray(data, info, verbose="error")
            raw.set_montage("colin27_1020", on_missing="ignore", verbose="error")
            description = {
                "subject": int(subject),
                "session": int(session),
                "target": int(session) - 1,
                "count_quality": int(quality),
            }
            datasets.append(RawDataset(raw, description, target_name="target"))
    return BaseConcatDataset(datasets)


def load_bundled_eegmat(subjects=None, window_seconds=10.0, stride_seconds=None):
    """Bundled EEGMAT rest vs mental arithmetic as braindecode windows (100 Hz).

    Returns windows in microvolts with ``target`` (0 rest, 1 arithmetic) and metadata
    columns ``subject`` and ``count_quality``, as :func:`load_eegmat` does on the full
    data.
    """
    dataset = _read_bundled_eegmat(subjects)
    sfreq = dataset.datasets[0].raw.info["sfreq"]
    return windows_of(dataset, None, sfreq, window_seconds, stride_seconds)
