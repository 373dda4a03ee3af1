"""Windows at another sampling rate, with MNE's resampling, in the form they came in.

:func:`resample_windows` brings windows (arrays, ``mne.Epochs``, braindecode windows
and ``Subset`` objects or skorch ``SliceDataset`` objects of them) to another sampling rate, a
pretrained encoder's.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import Preprocessor
from skorch.helper import SliceDataset
from torch.utils.data import Subset

from braindecode_pars._util.logs import warn_once
from braindecode_pars.io.windowing import _dataset_sfreq, recording_rates, windows_info

logger = logging.getLogger(__name__)

#: The resampling methods of MNE (``mne.filter.resample``), its default first.
_RESAMPLE_METHODS = ("fft", "polyphase")


def _check_rate(name, value):
    """``value`` as a float, if it is a positive finite sampling rate; else ValueError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"Invalid value for the '{name}' parameter. Allowed values are positive finite "
            f"numbers (a sampling rate in Hz), but got {value!r} instead."
        )
    return float(value)


def _resampled_length(n_times, sfreq, new_sfreq, name="X"):
    """The number of samples of ``n_times`` samples at ``sfreq`` once at ``new_sfreq``
    (MNE's rounding), at least 1."""
    n_new = int(round(n_times * new_sfreq / sfreq))
    if n_new < 1:
        raise ValueError(
            f"'{name}' windows of {n_times} samples at {sfreq} Hz hold no sample at "
            f"new_sfreq={new_sfreq} Hz."
        )
    return n_new


#: The start of the warning :func:`resample_windows` gives when it upsamples (a caller
#: that says it otherwise may filter it by this text).
_UPSAMPLING = "resample_windows: upsampling"


def _say_upsampling(sfreq, new_sfreq):
    """Warn that windows brought from ``sfreq`` to a higher ``new_sfreq`` hold nothing
    above the Nyquist frequency of ``sfreq``."""
    if new_sfreq <= sfreq * (1 + 1e-9):
        return
    warn_once(
        f"{_UPSAMPLING} from {sfreq:g} Hz to {new_sfreq:g} Hz: the windows hold nothing "
        f"above {sfreq / 2:g} Hz (the Nyquist frequency of {sfreq:g} Hz), whatever their "
        f"new rate. Beside windows recorded at a higher rate, their band power above "
        f"{sfreq / 2:g} Hz is empty where the others' is not, and a classifier tells the "
        f"rates apart: band-limit every recording below {sfreq / 2:g} Hz (e.g. "
        f"raw.filter(None, {max(1, int(0.88 * sfreq / 2))})), or choose bands that end "
        "below it.",
        UserWarning,
        stacklevel=3,
    )


def _rescaled_metadata(metadata, ratio, n_times=None):
    """Window metadata with ``i_start_in_trial``/``i_stop_in_trial`` in samples at the new
    rate (``ratio`` = new / old); windows kept inside a recording of ``n_times`` samples."""
    metadata = metadata.copy()
    start = metadata["i_start_in_trial"].to_numpy(dtype=np.int64)
    stop = metadata["i_stop_in_trial"].to_numpy(dtype=np.int64)
    length = np.round((stop - start) * ratio).astype(np.int64)
    start = np.round(start * ratio).astype(np.int64)
    if n_times is not None:  # rounding may push the last window one sample out
        start = np.clip(start, 0, np.maximum(n_times - length, 0))
    metadata["i_start_in_trial"] = start
    metadata["i_stop_in_trial"] = start + length
    return metadata


def _resample_record(ds, new_sfreq, method, n_jobs=None):
    """One braindecode dataset (windows of a Raw or of Epochs, or a recording) at
    ``new_sfreq``, as a new dataset; ``ds`` is left as it was."""
    preprocessor = Preprocessor(
        "resample",
        sfreq=new_sfreq,
        method=method,
        n_jobs=n_jobs,
        verbose="error",
        apply_on_array=False,
    )
    new = copy.copy(ds)  # the same description, transform and targets, new data
    new._description = None if ds.description is None else ds.description.copy()
    if getattr(ds, "raw", None) is not None:
        old_sfreq = float(ds.raw.info["sfreq"])
        new.raw = preprocessor.apply(ds.raw.copy())  # braindecode's resampling of a Raw
        new.raw_preproc_kwargs = [*getattr(ds, "raw_preproc_kwargs", []), preprocessor.serialize()]
    elif getattr(ds, "windows", None) is not None:
        old_sfreq = float(ds.windows.info["sfreq"])
        epochs = ds.windows.copy()
        epochs.load_data()
        new.windows = preprocessor.apply(epochs)  # mne.Epochs.resample
        new._fast_disk = False  # the windows are in memory now, not read from the Raw
        new.window_preproc_kwargs = [
            *getattr(ds, "window_preproc_kwargs", []),
            preprocessor.serialize(),
        ]
    else:
        raise TypeError(
            f"'X' holds a {type(ds).__name__}, a dataset without 'raw' or 'windows' to resample."
        )
    metadata = getattr(ds, "metadata", None)
    if metadata is not None and hasattr(ds, "crop_inds"):
        raw = getattr(new, "raw", None)
        n_times = raw.n_times if getattr(ds, "raw", None) is not None else None
        metadata = _rescaled_metadata(metadata, new_sfreq / old_sfreq, n_times)
        new.metadata = metadata
        if getattr(ds, "windows", None) is not None and getattr(ds, "raw", None) is None:
            new.windows.metadata = metadata
        new.crop_inds = metadata.loc[
            :, ["i_window_in_trial", "i_start_in_trial", "i_stop_in_trial"]
        ].to_numpy()
        if hasattr(ds, "window_kwargs"):
            step = ("resample_windows", {"sfreq": new_sfreq, "method": method})
            new.window_kwargs = [*ds.window_kwargs, step]
    return new


def resample_windows(X, sfreq, new_sfreq, *, method="fft", n_jobs=None):
    """Windows resampled to ``new_sfreq`` with MNE's resampling, in the form they came in.

    A pretrained encoder works at one sampling rate (the shipped ``pars-small`` at
    100 Hz) while data come at others (``load_physionet_mi()`` gives 200 Hz): this
    brings them to the encoder's rate. MNE does the resampling (anti-aliasing
    included) in every case:

    - an array (n_windows, n_chans, n_times): every window on its own, as
      ``mne.EpochsArray(X, info).resample(new_sfreq)`` does (``mne.filter.resample``
      with MNE's settings for epochs: ``npad="auto"``, ``window="auto"``,
      ``pad="edge"``);
    - ``mne.Epochs``: ``epochs.copy().resample(new_sfreq)``;
    - braindecode windows (a ``BaseConcatDataset``): windows cut from a Raw
      (``create_windows_from_events``, ``create_fixed_length_windows``) have their
      whole recording resampled, braindecode's way (``Preprocessor("resample",
      sfreq=new_sfreq)``, i.e. ``raw.resample``), and their start and stop samples
      moved to the new rate (rounded to the nearest sample); windows held as
      ``mne.Epochs`` are resampled as epochs; recordings not cut into windows are
      resampled whole. Each recording is resampled from its own rate, so the windows of
      recordings at several rates (which
      :func:`~braindecode_pars.io.windows.read_windows` refuses) come out at one.
      ``Subset`` objects and skorch ``SliceDataset`` objects of windows keep
      their indices.

    Upsampling (``new_sfreq`` above the windows' rate) warns once per call: the windows
    hold nothing above the Nyquist frequency of their rate, which band power and an
    encoder read beside windows recorded at a higher rate (band-limit them all below
    it). The input is left as it was. Resampling whole recordings before cutting windows
    (``Preprocessor("resample", sfreq=...)`` in braindecode's ``preprocess``) gives the
    same samples as the braindecode case here (up to the rounding of window starts)
    and is the cheaper way when you build the windows yourself.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | Subset | \
SliceDataset | mne.Epochs
        The windows.
    sfreq : float | None
        The windows' sampling rate in Hz. Needed for an array; for windows that carry
        theirs (braindecode windows, ``mne.Epochs``) None, or the same rate (that of
        every recording).
    new_sfreq : float
        The sampling rate to resample to, in Hz (e.g. ``load_encoder("pars-small").sfreq``).
    method : "fft" | "polyphase"
        MNE's resampling method (``mne.filter.resample``); "fft", MNE's default.
    n_jobs : int | None
        Parallel jobs of MNE's resampling.

    Returns
    -------
    resampled : ndarray | BaseConcatDataset | Subset | SliceDataset | mne.Epochs
        The same kind as ``X``: an array of shape (n_windows, n_chans,
        round(n_times * new_sfreq / sfreq)) and X's float dtype (float64 for integer
        input), or new windows or epochs at ``new_sfreq``.

    Raises
    ------
    ValueError
        For a rate that is not a positive finite number, an array that is not 3-D,
        an unknown ``method``, a ``sfreq`` that differs from the windows' own, or
        windows that would hold no sample.

    Examples
    --------
    Arrays, at 200 Hz to the shipped encoder's 100 Hz:

    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((8, 64, 800))  # 4-s windows, 200 Hz
    >>> resample_windows(X, sfreq=200.0, new_sfreq=100.0).shape
    (8, 64, 400)

    braindecode windows (and ``mne.Epochs``) carry their rate:

    >>> from braindecode_pars.datasets import load_physionet_mi
    >>> windows = load_physionet_mi(runs=[4])  # doctest: +SKIP
    >>> at_100 = resample_windows(windows, None, 100.0)  # doctest: +SKIP
    >>> at_100[0][0].shape  # doctest: +SKIP
    (64, 400)
    """
    new_sfreq = _check_rate("new_sfreq", new_sfreq)
    if method not in _RESAMPLE_METHODS:
        allowed = " and ".join(repr(m) for m in _RESAMPLE_METHODS)
        raise ValueError(
            f"Invalid value for the 'method' parameter. Allowed values are {allowed}, but "
            f"got {method!r} instead."
        )
    if isinstance(X, SliceDataset):
        inner = resample_windows(X.dataset, sfreq, new_sfreq, method=method, n_jobs=n_jobs)
        return SliceDataset(inner, idx=X.idx, indices=X.indices)
    if isinstance(X, Subset):
        inner = resample_windows(X.dataset, sfreq, new_sfreq, method=method, n_jobs=n_jobs)
        return Subset(inner, X.indices)
    if isinstance(X, BaseConcatDataset | mne.BaseEpochs):
        if isinstance(X, mne.BaseEpochs):
            rates = [float(X.info["sfreq"])]
        else:  # every recording at its own rate
            rates = list(recording_rates(X)) or [float(windows_info(X)["sfreq"])]
        own = " and ".join(str(rate) for rate in rates)
        if sfreq is not None and any(abs(_check_rate("sfreq", sfreq) - r) > 1e-6 for r in rates):
            raise ValueError(
                f"'sfreq'={sfreq} differs from the sampling rate of the 'X' windows "
                f"({own} Hz); pass sfreq=None for windows that carry their rate."
            )
        _say_upsampling(min(rates), new_sfreq)
        if isinstance(X, mne.BaseEpochs):
            _resampled_length(len(X.times), rates[0], new_sfreq)
            with mne.use_log_level("error"):
                epochs = X.copy().load_data()
                return epochs.resample(new_sfreq, method=method, n_jobs=n_jobs)
        for ds in X.datasets:
            if hasattr(ds, "crop_inds") and len(ds.crop_inds):
                _, start, stop = ds.crop_inds[0]
                _resampled_length(int(stop - start), _dataset_sfreq(ds), new_sfreq)
        logger.info("Resampling %d windows from %s Hz to %s Hz.", len(X), own, new_sfreq)
        with mne.use_log_level("error"):
            datasets = [_resample_record(ds, new_sfreq, method, n_jobs) for ds in X.datasets]
        return BaseConcatDataset(
            datasets,
            target_transform=getattr(X, "target_transform", None),
        )
    array = np.asarray(X)
    if array.ndim != 3:
        raise ValueError(
            "Invalid value for the 'X' parameter. Allowed values are arrays of shape "
            "(n_windows, n_chans, n_times), braindecode windows and mne.Epochs, but got "
            f"an array of shape {array.shape} instead."
        )
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"'X' must be real numbers, but got dtype {array.dtype}.")
    if sfreq is None:
        raise ValueError(
            "Invalid value for the 'sfreq' parameter. Allowed values are positive finite "
            "numbers (a sampling rate in Hz): an array does not carry its rate, but got "
            "None instead."
        )
    sfreq = _check_rate("sfreq", sfreq)
    _resampled_length(array.shape[-1], sfreq, new_sfreq)
    _say_upsampling(sfreq, new_sfreq)
    dtype = array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64
    resampled = mne.filter.resample(
        array.astype(np.float64),
        up=new_sfreq,
        down=sfreq,
        npad="auto",
        window="auto",
        pad="edge",
        method=method,
        n_jobs=n_jobs,
        verbose="error",
    )  # what mne.Epochs.resample does
    return resampled.astype(dtype, copy=False)
