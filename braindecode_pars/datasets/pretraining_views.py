"""The pretraining data that ``braindecode-pars store`` assembles: recordings or the
shared corpus, as windows to write to a window store, and the EEGMAT subjects named by
numbers and sets; plain functions for scripts too.
"""

from __future__ import annotations


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
    picks="eeg",
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
        respiration or reference derivations; a list: its names, and the automatic
        ones when it holds "auto"; ``[]`` keeps every EEG channel.
    picks : str | list of str
        Channels of ``recordings`` to keep (MNE's ``picks``): ``"eeg"``, or names.
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
            picks=picks,
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
