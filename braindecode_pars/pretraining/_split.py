"""Which pretraining windows validate a run, and how many train."""

from __future__ import annotations

import math

import numpy as np


def held_out_recordings(dataset, fraction, seed=0):
    """Indices of the windows of whole recordings held out for validation, or None.

    For a :class:`~braindecode_pars.pretraining.SingleChannelWindows` view, recordings are
    taken in a seeded random order until their windows make at least ``fraction`` of
    all windows: validation windows then share no recording with the training
    windows, whose crops may reach beyond their own window into its neighbours. None
    (split by windows instead) when the dataset does not say which recording a window
    comes from, when it has fewer than 2 recordings, or when the first recording drawn
    alone holds more than twice ``fraction`` of the windows (too few recordings for a
    split by recording of that size). A view whose ``split_groups`` is set (one label
    per window, e.g. the subject) is split by those groups instead of its recordings.
    """
    index = getattr(dataset, "index", None)
    if index is None or len(index) == 0:
        return None
    recording = np.asarray(index)[:, 0]
    groups = getattr(dataset, "split_groups", None)
    if groups is not None:
        recording = np.asarray(groups)
        if len(recording) != len(index):
            raise ValueError(
                f"'split_groups' has {len(recording)} labels, but the view has "
                f"{len(index)} windows."
            )
    names, counts = np.unique(recording, return_counts=True)
    if len(names) < 2:
        return None
    order = np.random.default_rng(seed).permutation(len(names))
    taken = np.cumsum(counts[order])
    n_valid = int(np.searchsorted(taken, fraction * len(recording))) + 1
    if taken[n_valid - 1] > 2 * fraction * len(recording) or n_valid >= len(names):
        return None
    return np.flatnonzero(np.isin(recording, names[order[:n_valid]]))


def training_windows(dataset, valid_fraction):
    """How many windows of ``dataset`` train when ``valid_fraction`` is held out, as
    :meth:`~braindecode_pars.pretraining.PretrainNet.get_split_datasets` splits it: whole
    recordings when :func:`held_out_recordings` can (their windows need not make
    exactly the fraction), else the fraction of the windows rounded up, as skorch's
    ``ValidSplit``."""
    if not valid_fraction:
        return len(dataset)
    valid = held_out_recordings(dataset, valid_fraction)
    if valid is not None:
        return len(dataset) - len(valid)
    return len(dataset) - math.ceil(valid_fraction * len(dataset))
