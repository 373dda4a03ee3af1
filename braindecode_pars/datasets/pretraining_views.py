"""The pretraining data a run asks for, assembled: recordings, the shared corpus, the
bundled PhysioNet-MI subject or a window store, as one single-channel view.

These are the steps ``braindecode-pars pretrain`` and ``store`` take, as plain
functions for scripts and estimators. Under torchrun, :func:`pretraining_view` reads
recordings once: rank 0 writes them to a window store that the other processes wait
for (:func:`_wait_for`), and every process memory-maps it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from pathlib import Path


def eegmat_subjects(names=None, name="eegmat_subjects"):
    """EEGMAT subject numbers from numbers and the names of subject sets.

    Parameters
    ----------
    names : sequence of str or int | None
        Subject numbers (``3`` or ``"3"``), ``"pool"`` (the 12 subjects no development
        split scores,
        :data:`~braindecode_pars.datasets.eegmat.EEGMAT_POOL_SUBJECTS`) or
        ``"train"`` (the 24 non-test subjects,
        :data:`~braindecode_pars.datasets.EEGMAT_TRAIN_SUBJECTS`). None or empty: the
        24 training subjects.
    name : str
        The parameter (or command-line flag) that ``names`` came from, named by the
        error.

    Returns
    -------
    subjects : tuple of int
        The subjects, sorted, each once.

    Raises
    ------
    ValueError
        When a name is neither a number nor a set's name.
    """
    from .eegmat import EEGMAT_TRAIN_SUBJECTS

    if not names:
        return EEGMAT_TRAIN_SUBJECTS
    subjects = []
    for value in names:
        if value == "pool":  # the development tasks' split (imported only when named)
            from .eegmat import EEGMAT_POOL_SUBJECTS

            subjects += list(EEGMAT_POOL_SUBJECTS)
        elif value == "train":
            subjects += list(EEGMAT_TRAIN_SUBJECTS)
        elif isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            subjects.append(int(value))
        else:
            raise ValueError(
                f"'{name}' takes subject numbers, 'pool' or 'train', but got {value!r}."
            )
    return tuple(sorted(set(subjects)))


def recording_windows(
    recordings=None,
    shared_data=None,
    *,
    sfreq=None,
    window_seconds=10.0,
    stride_seconds=5.0,
    l_freq=0.3,
    h_freq=None,
    notch_freq=None,
    exclude="auto",
    on_error="raise",
    eegmat_subjects=None,
    muse=False,
    lazy=False,
):
    """Windows of your recordings or of the shared corpus, or None when neither is given.

    Parameters
    ----------
    recordings : sequence of str | None
        Folders or globs of files MNE reads, as
        :func:`~braindecode_pars.datasets.load_recordings` takes them. Taken before
        ``shared_data`` when both are given.
    shared_data : str | Path | None
        The folder of the shipped encoder's corpus (``eegmat/``, ``sleep-edf-atm/``),
        read with :func:`~braindecode_pars.datasets.shared_corpus`.
    sfreq : float | None
        Rate the recordings are resampled to; None: 100 Hz.
    window_seconds : float
        Window length.
    stride_seconds : float | None
        Stride of ``recordings``' windows (the shared corpus takes its own).
    l_freq, h_freq, notch_freq : float | None
        High-pass, low-pass (None: ``min(75, 0.45 sfreq)``) and power-line notch of
        ``recordings``.
    exclude : "auto" | list of str
        Channels of ``recordings`` left out; "auto": those named like ECG, EOG, EMG,
        respiration or reference derivations; ``[]`` keeps every EEG channel.
    on_error : {"raise", "skip"}
        A file of ``recordings`` that cannot be read: stop naming it, or skip it with
        a warning.
    eegmat_subjects : sequence of int | None
        The EEGMAT subjects of ``shared_data`` (see :func:`eegmat_subjects`); None:
        the 24 training subjects.
    muse : bool
        Add the Muse headband recordings of ``shared_data``.
    lazy : bool
        Return ``recordings`` as a stream that reads one recording at a time (to write
        a store without holding the corpus in memory).

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset | RecordingStream | None
        The windows, or None when neither ``recordings`` nor ``shared_data`` is given.
    """
    rate = sfreq or 100.0
    if recordings:
        from .recordings import load_recordings

        return load_recordings(
            recordings,
            sfreq=rate,
            window_seconds=window_seconds,
            stride_seconds=stride_seconds,
            l_freq=l_freq,
            h_freq=h_freq,
            notch_freq=notch_freq,
            exclude=exclude,
            on_error=on_error,
            lazy=lazy,
        )
    if shared_data:
        from .corpus import shared_corpus
        from .eegmat import EEGMAT_TRAIN_SUBJECTS

        return shared_corpus(
            shared_data,
            sfreq=rate,
            window_seconds=window_seconds,
            eegmat_subjects=EEGMAT_TRAIN_SUBJECTS if eegmat_subjects is None else eegmat_subjects,
            muse=muse,
        )
    return None


def data_key(settings):
    """A short hash of the settings that choose and preprocess pretraining data.

    Parameters
    ----------
    settings : dict
        JSON-serialisable settings (the command line's data flags by name).

    Returns
    -------
    key : str
        10 hexadecimal digits; the same settings give the same key.
    """
    spec = json.dumps(settings, sort_keys=True)
    return hashlib.sha1(spec.encode()).hexdigest()[:10]


def _wait_for(path, poll_seconds=1.0):
    """Wait until the file ``path`` exists.

    Processes other than rank 0 wait so for the store rank 0 writes; torchrun ends
    every process when one fails, so the wait has no time limit.

    Parameters
    ----------
    path : str | Path
        The file to wait for.
    poll_seconds : float
        Seconds between two looks.
    """
    while not Path(path).is_file():
        time.sleep(poll_seconds)


def pretraining_view(
    *, store=None, physionet_subjects=(1,), physionet_path=None, shared_store=None, **options
):
    """The single-channel pretraining view of the data named: a store, recordings, the
    shared corpus, or PhysioNet-MI.

    The first source given is taken, in that order; without any, the continuous
    windows of PhysioNet-MI's ``physionet_subjects`` (bundled, or in
    ``physionet_path``).

    Parameters
    ----------
    store : str | Path | None
        A window store written by
        :func:`~braindecode_pars.datasets.write_window_store`, memory-mapped.
    physionet_subjects : sequence of int
        PhysioNet-MI subjects taken when no other source is given.
    physionet_path : str | Path | None
        Folder in MNE's eegbci layout; None: the bundled recordings.
    shared_store : str | Path | None
        Under torchrun (more than one process), the folder where rank 0 writes
        ``recordings`` or ``shared_data`` as a store once, which every process then
        memory-maps; the others wait for it. Required there; a store already in it
        is reused, so it should name the data (see :func:`data_key`).
    **options
        The keyword arguments of :func:`recording_windows` but ``lazy``, with its
        defaults: ``recordings``, ``shared_data``, ``sfreq``, ``window_seconds``,
        ``stride_seconds``, ``l_freq``, ``h_freq``, ``notch_freq``, ``exclude``,
        ``on_error``, ``eegmat_subjects`` and ``muse``. ``window_seconds`` and
        ``stride_seconds`` (10 and 5 s) are also the window length and stride of
        PhysioNet-MI.

    Returns
    -------
    view : SingleChannelWindows
        The pretraining view.
    """
    from ..training.distributed import _is_distributed, rank
    from .single_channel import SingleChannelWindows
    from .store import write_window_store

    if "lazy" in options:
        raise TypeError("pretraining_view() got an unexpected keyword argument 'lazy'")
    bound = inspect.signature(recording_windows).bind(**options)  # a wrong name: TypeError
    bound.apply_defaults()
    options = bound.arguments  # every argument of recording_windows, defaults filled in
    if store:
        return SingleChannelWindows.from_store(store)
    if not (options["recordings"] or options["shared_data"]) or not _is_distributed():
        windows = recording_windows(**options)
        if windows is None:
            from .physionet_mi import load_physionet_mi_continuous

            windows = load_physionet_mi_continuous(
                physionet_subjects,
                path=physionet_path,
                window_seconds=options["window_seconds"],
                stride_seconds=options["stride_seconds"],
            )
        return SingleChannelWindows(windows)
    if shared_store is None:
        raise ValueError(
            "'shared_store' must name a folder when several processes read 'recordings' or "
            "'shared_data' (rank 0 writes them there once), but got None."
        )
    shared_store = Path(shared_store)
    if rank() == 0 and not (shared_store / "index.npz").is_file():
        windows = recording_windows(**{**options, "lazy": True})
        write_window_store(windows, shared_store, overwrite=True)
    _wait_for(shared_store / "index.npz")
    return SingleChannelWindows.from_store(shared_store)
