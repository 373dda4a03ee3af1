"""A recording's EEG channels as pretraining reads them: which channels, read as
float32 in blocks, one sampling rate for all, and how a message names a recording."""

from __future__ import annotations

import mne
import numpy as np

#: Bytes of float64 samples read from a recording at a time.
_CHUNK_BYTES = 1 << 24


def eeg_picks(info, what):
    """Indices of the EEG channels of ``info`` (bad channels left out), or a clear error.

    ``what`` names the recording in the error message.
    """
    picks = mne.pick_types(info, eeg=True, exclude="bads")
    if len(picks) == 0:
        types = sorted(set(info.get_channel_types()))
        raise ValueError(
            f"{what} has no EEG channel (channel types: {types}); pretraining reads EEG "
            "channels only: set the channel types with raw.set_channel_types()."
        )
    return picks


def describe(ds, position):
    """A short name of a recording for messages: its file (never its subject: a log
    names no one), else its description, or its position."""
    description = getattr(ds, "description", None)
    if description is None or len(description) == 0:
        return f"Recording {position}"
    items = description.to_dict()
    named = {k: items[k] for k in ("file", "path") if items.get(k)}
    items = ", ".join(f"{k}={v}" for k, v in (named or items).items())
    return f"Recording {position} ({items})"


def check_same_sfreq(sfreq, new, what):
    """The common sampling rate so far, or ``ValueError`` naming both rates."""
    if sfreq is not None and abs(sfreq - new) > 1e-6:
        raise ValueError(
            f"Recordings have different sampling rates ({sfreq:g} and {new:g} Hz, the "
            f"latter in {what}); resample them to one rate (the readers' 'sfreq', or "
            "braindecode's Preprocessor('resample', sfreq=...)) before pretraining."
        )
    return float(new)


def _float32_blocks(raw, picks):
    """``(start, block)`` pairs covering the ``picks`` of ``raw``, float32, in time order.

    About ``_CHUNK_BYTES`` of float64 samples are read at a time (from memory, or from
    the file of a recording that is not preloaded), so that converting a recording
    adds little to it.
    """
    step = max(1, _CHUNK_BYTES // (8 * len(picks)))
    for start in range(0, raw.n_times, step):
        stop = min(raw.n_times, start + step)
        yield start, raw.get_data(picks=picks, start=start, stop=stop).astype(np.float32)


def read_float32(raw, picks):
    """The ``picks`` of ``raw`` as one (n_picks, n_times) float32 array, read in blocks."""
    out = np.empty((len(picks), raw.n_times), dtype=np.float32)
    for start, block in _float32_blocks(raw, picks):
        out[:, start : start + block.shape[1]] = block
    return out
