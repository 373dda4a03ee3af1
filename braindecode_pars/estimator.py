"""PARSClassifier: pretrain a single-channel encoder, then fine-tune it, in one ``fit``."""

from __future__ import annotations

import copy
import logging
import math
import numbers
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from braindecode.datasets import BaseConcatDataset
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.utils.validation import check_is_fitted
from skorch.helper import SliceDataset
from torch.utils.data import Subset

from ._checks import check_int, check_option, check_range
from .datasets.single_channel import SingleChannelWindows
from .models import PRETEXT_MODELS, pretext_params
from .models.classifier import MultiChannelClassifier
from .models.encoder import PatchEncoder
from .training.checkpoints import load_encoder
from .training.finetune import (
    AUGMENTATION_PRESETS,
    FixedCrops,
    RandomCrops,
    crop_starts,
    make_finetune_net,
    standard_augmentation,
)
from .training.pretrain import PretrainNet
from .training.schedule import epochs_for_steps

logger = logging.getLogger(__name__)

#: ``crop_seconds="auto"`` crops windows at least this long (s) to half their length.
AUTO_CROP_MIN_SECONDS = 10.0

#: Values of ``PARSClassifier(finetune=...)``.
FINETUNE_STRATEGIES = ("auto", "full", "frozen", "lp-ft")


def windows_to_arrays(windows):
    """Stack braindecode windows into arrays.

    Returns
    -------
    X : ndarray, shape (n_windows, n_chans, n_times), float32
    y : ndarray, shape (n_windows,)
    sfreq : float
    """
    if not isinstance(windows, BaseConcatDataset) or len(windows) == 0:
        raise ValueError("'windows' must be a non-empty braindecode BaseConcatDataset.")
    X = np.stack([np.asarray(windows[i][0], dtype=np.float32) for i in range(len(windows))])
    y = np.asarray([windows[i][1] for i in range(len(windows))])
    first = windows.datasets[0]
    info = first.raw.info if getattr(first, "raw", None) is not None else first.windows.info
    return X, y, float(info["sfreq"])


class LabelledWindows(torch.utils.data.Dataset):
    """Windows with integer class codes, read one at a time: items ``(X, code)``.

    ``source`` is an array (n_windows, n_chans, n_times) or a dataset of window items
    ``(x, y, ...)`` (braindecode windows); nothing is copied, so a windows dataset is
    streamed from its recordings.
    """

    def __init__(self, source, codes, indices=None):
        self.source = source
        self.codes = np.asarray(codes, dtype=np.int64)
        self.indices = np.arange(len(source)) if indices is None else np.asarray(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        j = int(self.indices[i])
        x = self.source[j] if isinstance(self.source, np.ndarray) else self.source[j][0]
        return torch.as_tensor(np.asarray(x, dtype=np.float32)), int(self.codes[j])


class _Windows(torch.utils.data.Dataset):
    """A selection of window items ``(x, y, ...)`` of a dataset, read one at a time.

    ``base`` is a braindecode ``BaseConcatDataset``, any dataset of window items, or
    a list of items (what scikit-learn makes of braindecode windows when it splits
    them); ``indices`` selects items of ``base`` (None: all of them). The sampling
    rate and the labels are read from ``base`` when it is braindecode windows.
    """

    def __init__(self, base, indices=None):
        self.base = base
        self.indices = None if indices is None else np.asarray(indices, dtype=np.int64)

    def __len__(self):
        return len(self.base) if self.indices is None else len(self.indices)

    def __getitem__(self, i):
        return self.base[i if self.indices is None else int(self.indices[i])]

    @property
    def braindecode(self):
        return isinstance(self.base, BaseConcatDataset)

    def sfreq(self):
        """The windows' sampling rate, or None where no braindecode dataset is reachable."""
        return _windows_sfreq(self.base) if self.braindecode else None

    def targets(self):
        """Labels: the ``target`` metadata column of braindecode windows, else items' ``y``."""
        if self.braindecode:
            metadata = self.base.get_metadata()
            if "target" not in metadata.columns:
                return None
            targets = metadata["target"].to_numpy()
            return targets if self.indices is None else targets[self.indices]
        return np.asarray([np.asarray(self[i][1]).item() for i in range(len(self))])

    def shape_and_bad(self, name):
        """(n_chans, n_times) of the windows and how many hold NaN or inf."""
        if self.braindecode:
            shapes, bad = _windows_shapes_and_bad(self.base, self.indices)
        else:
            shapes, bad = set(), 0
            for i in range(len(self)):
                window = np.asarray(self[i][0])
                shapes.add(window.shape)
                bad += int(not np.isfinite(window).all())
        if len(shapes) != 1:
            raise ValueError(
                f"'{name}' windows must all have one shape (n_chans, n_times), but got "
                f"{sorted(shapes)}."
            )
        shape = shapes.pop()
        if len(shape) != 2:
            raise ValueError(
                f"'{name}' items must be windows of shape (n_chans, n_times), but got shape "
                f"{shape}; cut recordings into windows with braindecode's "
                "create_windows_from_events or create_fixed_length_windows."
            )
        return shape, bad

    def pretraining_sources(self):
        """What :class:`SingleChannelWindows` reads: the whole braindecode dataset (crops
        may then reach beyond a window, into its recording), or the selected windows."""
        if self.braindecode and self.indices is None:
            return [self.base]
        return [np.asarray(self[i][0], dtype=np.float32)[None] for i in range(len(self))]


def _unwrap_subsets(dataset, indices=None):
    """The dataset under nested ``torch.utils.data.Subset`` s, and the indices into it."""
    while isinstance(dataset, Subset):
        inner = np.asarray(dataset.indices, dtype=np.int64)
        indices = inner if indices is None else inner[np.asarray(indices, dtype=np.int64)]
        dataset = dataset.dataset
    return dataset, indices


def _is_window_items(X):
    """Whether ``X`` is a list of window items ``(x, y, ...)``, as indexing windows gives."""
    if not isinstance(X, list | tuple) or len(X) == 0:
        return False
    if not all(isinstance(item, tuple) and len(item) >= 2 for item in X):
        return False
    return np.ndim(X[0][0]) == 2


def _as_windows(X, name="X"):
    """``X`` as :class:`_Windows`, or None for array input.

    Windows are braindecode windows (a ``BaseConcatDataset``), a ``Subset`` of them, a
    skorch ``SliceDataset`` of them (``idx=0``), or the list of items ``(x, y, inds)``
    that scikit-learn's splitters make of braindecode windows.
    """
    if isinstance(X, SliceDataset):
        if X.idx != 0:
            raise ValueError(
                f"'{name}' is a SliceDataset of item {X.idx} of each window; pass "
                f"SliceDataset(windows, idx=0) as '{name}' (and idx=1 as 'y')."
            )
        return _Windows(*_unwrap_subsets(X.dataset, X.indices_))
    if isinstance(X, BaseConcatDataset | Subset):
        return _Windows(*_unwrap_subsets(X))
    if _is_window_items(X):
        return _Windows(X)
    return None


def _as_labels(y):
    """``y`` as an array; a skorch ``SliceDataset`` of labels reads braindecode metadata."""
    if isinstance(y, SliceDataset) and y.idx == 1:
        windows = _Windows(*_unwrap_subsets(y.dataset, y.indices_))
        labels = windows.targets() if windows.braindecode else None
        if labels is not None:
            return labels
    return None if y is None else np.asarray(y)


def _windows_shapes_and_bad(windows, indices=None):
    """The shapes of braindecode windows (all, or those at ``indices``), and how many
    hold NaN or inf.

    Each preloaded recording is read once through MNE's ``get_data`` and sliced per
    window; other windows are read one by one.
    """
    selected = np.arange(len(windows)) if indices is None else np.asarray(indices)
    ends = np.asarray(windows.cumulative_sizes, dtype=np.int64)
    which = np.searchsorted(ends, selected, side="right")  # the dataset of each window
    starts = np.concatenate([[0], ends[:-1]])
    shapes, bad = set(), 0
    for k in np.unique(which):
        ds = windows.datasets[k]
        local = selected[which == k] - starts[k]
        raw = getattr(ds, "raw", None)
        crop_inds = getattr(ds, "crop_inds", None)
        if raw is not None and getattr(raw, "preload", False) and crop_inds is not None:
            data = raw.get_data()
            items = (data[:, start:stop] for _, start, stop in np.asarray(crop_inds)[local])
        else:
            items = (np.asarray(ds[int(i)][0]) for i in local)
        for window in items:
            shapes.add(window.shape)
            bad += int(not np.isfinite(window).all())
    return shapes, bad


def _shortest(sources):
    """Samples of the shortest recording or window :class:`SingleChannelWindows` would
    crop from ``sources`` (arrays or braindecode windows)."""
    lengths = []
    for source in sources:
        if not isinstance(source, BaseConcatDataset):
            lengths.append(source.shape[-1])
            continue
        for ds in source.datasets:
            raw = getattr(ds, "raw", None)
            crop_inds = getattr(ds, "crop_inds", None)
            if raw is not None and getattr(raw, "preload", False):
                lengths.append(raw.n_times)
            elif crop_inds is not None and len(crop_inds):
                lengths.append(int(min(stop - start for _, start, stop in crop_inds)))
            else:
                lengths += [np.shape(ds[i][0])[-1] for i in range(len(ds))]
    return min(lengths)


def _windows_sfreq(windows):
    first = windows.datasets[0]
    info = first.raw.info if getattr(first, "raw", None) is not None else first.windows.info
    return float(info["sfreq"])


class PARSClassifier(ClassifierMixin, BaseEstimator):
    """Self-supervised pretraining, then multi-channel fine-tuning, as one classifier.

    ``fit`` pretrains a :class:`~braindecode_pars.PatchEncoder` with PARS (or, with
    ``pretrain``, one of the baselines: MAE, MP3, DropPos) on the training windows
    (one random channel of a random crop per example, plus any ``X_unlabeled``),
    then fine-tunes a
    :class:`~braindecode_pars.MultiChannelClassifier` built on it, with the paper's
    settings (weighted cross-entropy, AdamW, the checkpoint of lowest validation
    loss). A saved encoder (``pretrained_encoder``) skips pretraining;
    ``pretrain_epochs=0`` without one trains from scratch, the paper's supervised
    baseline.

    ``X`` is an array (n_windows, n_chans, n_times) or braindecode windows, which
    are streamed rather than copied and carry their labels (metadata ``target``) and
    sampling rate. Windows go through scikit-learn's model selection as they are:
    ``cross_val_score(clf, windows, groups=groups, cv=LeaveOneGroupOut())`` hands
    ``fit`` the lists of window items ``(x, y, inds)`` that scikit-learn makes of them
    (these carry no sampling rate: set ``sfreq``); skorch's ``SliceDataset(windows)``
    as ``X`` (and ``SliceDataset(windows, idx=1)`` as ``y``) keeps the dataset, its
    sampling rate and its labels. A ``torch.utils.data.Subset`` of windows works too.

    Parameters
    ----------
    pretrain : {"pars", "mae", "mp3", "droppos"}
        The pretext task. All share the encoder, the pretraining net and its settings.
    pretrained_encoder : str | Path | PatchEncoder | None
        The name of an encoder shipped with the package (``"pars-small"``), a folder
        written by ``encoder.save_pretrained`` (braindecode's Hugging Face layout), a
        file written by :func:`~braindecode_pars.save_encoder`, or an instance (it is
        copied). Its sampling rate and patch length must match. It is read at
        the start of ``fit``.
    emb_dim, depth, n_heads, ff_dim, patch_seconds
        Encoder size; defaults are the paper's (512, 8, 8, 512, 1 s).
    n_patches, pos_mask_ratio
        PARS settings; paper: 40 patches, 0.8. ``pos_mask_ratio`` is also DropPos's
        ``gamma_pos``.
    mask_ratio : float
        Share of patches removed (MAE, DropPos) or hidden from keys and values (MP3).
    pretrain_window_seconds : float | None
        Length of the pretraining crops; default: 10 s, or the fine-tuning window
        when that is shorter (paper: 30 s). Windows of ``X_unlabeled`` must be at
        least this long.
    pretrain_epochs : int | None
        Pretraining epochs; None (default): as many as ``pretrain_steps`` optimiser
        steps take; 0: no pretraining (training from scratch).
    pretrain_steps : int
        Pretraining budget in optimiser steps when ``pretrain_epochs`` is None.
    pretrain_batch_size, pretrain_lr : int, float
        Pretraining batch size and maximum learning rate (warm-up then cosine).
    pretrain_valid_fraction : float | None
        Share of the pretraining windows held out to measure the pretext skill
        (``pretrain_history_``'s ``valid_skill``).
    pretrain_preset : {None, "paper"}
        The pretraining defaults (10-s crops, lr 1e-3, batch 64, 3,000 steps) make
        a few hundred windows learn on a CPU: measured on real EEG, the paper's
        settings (lr 1e-4, batch 512, 30-s windows) stay at the loss of predicting
        no shift for thousands of steps (``benchmarks/results/pretext_settings.md``).
        ``"paper"`` restores them for a corpus of the paper's size: lr 1e-4,
        batch 512, 1000 epochs, 30-s crops.
    finetune : {"auto", "full", "frozen", "lp-ft"}
        "full" (the paper's): every weight is trained; "frozen": the encoder is
        fixed and only the spatial head trains (a probe of the representation);
        "lp-ft": the probe for half of ``max_epochs``, then every weight at the
        encoder rate ``lr * encoder_lr_scale``. "auto" (default): "frozen" when the
        encoder is pretrained (``pretrained_encoder``, or pretraining in ``fit``),
        "full" when it is trained from scratch (``pretrain_epochs=0``); the
        strategy used is ``finetune_``. See "Defaults" below.
    encoder_lr_scale : float
        The encoder's learning rate as a fraction of ``lr`` ("full" and the second
        stage of "lp-ft").
    amplitude : bool
        Give the spatial head each channel's log amplitude, which the encoder's
        instance normalisation removes (see :class:`MultiChannelClassifier`).
    max_epochs : int
        Fine-tuning epochs. Paper: 200.
    batch_size : int
        Fine-tuning batch size.
    lr, weight_decay : float
        AdamW settings of fine-tuning (and the weight decay of pretraining).
        Paper: 1e-4 and 1e-4.

        See "Defaults" below. The paper's lr 1e-4, batch 64 and 200 epochs are
        for thousands of labelled windows: pass them, with ``finetune="full"``,
        ``crop_seconds=None`` and ``min_valid_groups=3`` (the best epoch on
        held-out subjects), for the paper's protocols (the configurations in
        ``docs/configs`` do).
    valid_fraction : float
        Share of the training windows used to pick the best epoch: stratified, or,
        when ``fit`` gets ``groups``, whole groups (subjects).
    min_valid_groups : int
        With ``groups`` (passed to ``fit``, or the windows' ``subject`` column) from
        fewer subjects than this (default 30), no validation split is made: the
        model trains on every window for ``max_epochs`` and keeps the last epoch.
        With a few subjects, the epoch of lowest loss on one or two held-out
        subjects is a coin toss that often lands on an early epoch predicting one
        class (see "Defaults"). Without groups the split is a stratified share of
        the windows.
    spatial_drop_prob : float
        Spatial-token dropout of the fine-tuning model. Paper: 0.5.
    crop_seconds : "auto" | float | None
        Fine-tune on random crops of this length cut from the labelled windows (a new
        crop of every window each epoch) and predict a window by averaging the class
        probabilities of ``n_eval_crops`` crops spread over it (validation scores
        those crops too). "auto" (default): half the window for windows of 10 s or
        more (5 s of a 10-s window: the best at few labels on EEGMAT), whole
        windows for shorter ones (2-s crops of PhysioNet-MI's 4-s cue windows lost
        9 points to whole windows); the crop used is ``n_crop_`` samples. None:
        whole windows, as the paper.
    n_eval_crops : int
        Crops per window at validation and prediction when ``crop_seconds`` is set.
    augmentation : "standard" | list of braindecode Transform | None
        Augmentations of the fine-tuning batches (``braindecode.augmentation``,
        through its ``AugmentedDataLoader``): ``"standard"``
        (:func:`~braindecode_pars.training.finetune.standard_augmentation`:
        FTSurrogate, ChannelsDropout, SmoothTimeMask, each with probability 0.5),
        a list of transforms, e.g. ``[FTSurrogate(0.5)]`` or
        :class:`~braindecode_pars.datasets.eesm17.ChannelNoise` as the paper uses on
        EESM17, or None.
    sfreq : float | None
        Sampling rate of array input and of window items split by scikit-learn;
        read from braindecode windows otherwise.
    device : str
        ``"cpu"`` or ``"cuda"`` (``"cuda:1"``...); a GPU must be visible to torch.
    random_state : int | None
        Seed of every random draw: the same seed gives the same predictions. An int
        seeds torch's global generator (``torch.manual_seed(random_state)`` at the
        start of training, as braindecode's ``set_random_seeds`` does), from which
        the model's initialisation, dropout, batch shuffling and the pretraining
        crops draw; it seeds the validation split too. None leaves torch's
        generator alone, and two fits then differ.
    verbose : int
        1 (default): progress bars of pretraining and fine-tuning, and the
        fine-tuning epoch table, as skorch and braindecode's ``EEGClassifier`` print
        them (the pretraining epoch table goes to the ``braindecode_pars`` logger).
        0: quiet.

    Attributes
    ----------
    classes_ : ndarray
        The labels seen in ``fit``.
    finetune_ : str
        The fine-tuning strategy used ("auto" resolved).
    n_crop_ : int
        Samples per fine-tuning crop (``n_times_`` without crops).
    encoder_ : PatchEncoder
        The fine-tuned encoder.
    module_ : MultiChannelClassifier
        The fine-tuned model.
    net_ : braindecode.EEGClassifier
        The fine-tuning net; ``history_`` is its history.
    pretrain_history_ : skorch History | None
        The pretraining history, if pretraining ran.

    Notes
    -----
    **Defaults.** The fine-tuning defaults (``finetune="auto"``, i.e. a frozen
    pretrained encoder under a trained spatial head; ``crop_seconds="auto"``, i.e.
    5-s crops of 10-s windows; the last of 40 epochs when the windows come from
    fewer than 30 subjects, through ``min_valid_groups=30``; lr 1e-3, batch 16, no
    amplitude path) are the configuration that the low-label benchmark ranked
    first at few labels, in a selection run inside EEGMAT's 24 training subjects,
    never its 12 test subjects (``benchmarks/results/low_label_eegmat_selection.md``:
    12 subjects scored on, k labelled subjects drawn from the other 12, five
    draws, the shipped ``pars-small`` encoder). Balanced accuracy at k = 1 / 2 / 4 /
    8: 0.544 / 0.621 / 0.639 / 0.629, against 0.534 / 0.544 / 0.507 / 0.591 for
    full fine-tuning of whole windows (the earlier defaults: the best validation
    epoch from 3 subjects, the last below), 0.485 / 0.546 / 0.562 / 0.507 from
    scratch with these defaults, and 0.564 / 0.581 / 0.625 / 0.622 for the
    band-power floor (:class:`~braindecode_pars.floor.BandPowerClassifier`). The
    same probe with the epoch of lowest validation loss on 1 or 2 held-out
    subjects scored 0.552 / 0.508 at k = 4 / 8, and with all 24 training subjects
    (5 held out for validation) 0.534 ± 0.016 on the test subjects against 0.588 ±
    0.027 for the last epoch (five fit seeds): hence no validation split below 30
    subjects. Crops of 2.5 or 7.5 s, augmentation, the amplitude path, lr 3e-3,
    spatial dropout 0.2 and 80 epochs did no better there (at most 1.2 points above
    at one k, below at the others).
    Scores on the test subjects are in ``benchmarks/results/low_label_eegmat.md``.
    From scratch, "auto" fine-tunes every weight (a frozen random encoder is no
    representation).

    Examples
    --------
    >>> from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    >>> from skorch.helper import SliceDataset
    >>> from braindecode_pars.datasets import load_physionet_mi
    >>> windows = load_physionet_mi()  # doctest: +SKIP
    >>> blocks = windows.get_metadata()["block"]  # doctest: +SKIP
    >>> clf = PARSClassifier(emb_dim=64, depth=2, n_heads=4, ff_dim=64, n_patches=8,
    ...                      pretrain_epochs=5, max_epochs=20)
    >>> cross_val_score(clf, SliceDataset(windows), groups=blocks,
    ...                 cv=LeaveOneGroupOut())  # doctest: +SKIP
    """

    def __init__(
        self,
        pretrain="pars",
        pretrained_encoder=None,
        emb_dim=512,
        depth=8,
        n_heads=8,
        ff_dim=512,
        patch_seconds=1.0,
        n_patches=40,
        pos_mask_ratio=0.8,
        mask_ratio=0.75,
        pretrain_window_seconds=None,
        pretrain_epochs=None,
        pretrain_steps=3000,
        pretrain_batch_size=64,
        pretrain_lr=1e-3,
        pretrain_valid_fraction=0.1,
        pretrain_preset=None,
        finetune="auto",
        encoder_lr_scale=1.0,
        amplitude=False,
        max_epochs=40,
        batch_size=16,
        lr=1e-3,
        weight_decay=1e-4,
        valid_fraction=0.2,
        min_valid_groups=30,
        spatial_drop_prob=0.5,
        crop_seconds="auto",
        n_eval_crops=5,
        augmentation=None,
        sfreq=None,
        device="cpu",
        random_state=None,
        verbose=1,
    ):
        self.pretrain = pretrain
        self.pretrained_encoder = pretrained_encoder
        self.emb_dim = emb_dim
        self.depth = depth
        self.n_heads = n_heads
        self.ff_dim = ff_dim
        self.patch_seconds = patch_seconds
        self.n_patches = n_patches
        self.pos_mask_ratio = pos_mask_ratio
        self.mask_ratio = mask_ratio
        self.pretrain_window_seconds = pretrain_window_seconds
        self.pretrain_epochs = pretrain_epochs
        self.pretrain_steps = pretrain_steps
        self.pretrain_batch_size = pretrain_batch_size
        self.pretrain_lr = pretrain_lr
        self.pretrain_valid_fraction = pretrain_valid_fraction
        self.pretrain_preset = pretrain_preset
        self.finetune = finetune
        self.encoder_lr_scale = encoder_lr_scale
        self.amplitude = amplitude
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.valid_fraction = valid_fraction
        self.min_valid_groups = min_valid_groups
        self.spatial_drop_prob = spatial_drop_prob
        self.crop_seconds = crop_seconds
        self.n_eval_crops = n_eval_crops
        self.augmentation = augmentation
        self.sfreq = sfreq
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.non_deterministic = self.random_state is None
        return tags

    # -- checks --------------------------------------------------------------------------
    def _check_params(self):
        check_option("pretrain", self.pretrain, tuple(PRETEXT_MODELS))
        check_range("mask_ratio", self.mask_ratio, 0, 1, high_open=True)
        for name in ("emb_dim", "depth", "n_heads", "ff_dim", "n_patches", "max_epochs"):
            check_int(name, getattr(self, name), 1)
        if self.pretrain_epochs is not None:
            check_int("pretrain_epochs", self.pretrain_epochs, 0)
        check_int("pretrain_steps", self.pretrain_steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_int("pretrain_batch_size", self.pretrain_batch_size, 1)
        check_range("pretrain_lr", self.pretrain_lr, 0, math.inf, low_open=True)
        if self.pretrain_valid_fraction is not None:
            check_range(
                "pretrain_valid_fraction", self.pretrain_valid_fraction, 0, 1, high_open=True
            )
        check_option("pretrain_preset", self.pretrain_preset, (None, "paper"))
        check_option("finetune", self.finetune, FINETUNE_STRATEGIES)
        check_range("encoder_lr_scale", self.encoder_lr_scale, 0, math.inf, low_open=True)
        check_option("amplitude", self.amplitude, (False, True))
        check_int("min_valid_groups", self.min_valid_groups, 2)
        check_range("pos_mask_ratio", self.pos_mask_ratio, 0, 1, low_open=True)
        check_range("patch_seconds", self.patch_seconds, 0, math.inf, low_open=True)
        check_range("lr", self.lr, 0, math.inf, low_open=True)
        check_range("weight_decay", self.weight_decay, 0, math.inf)
        check_range("valid_fraction", self.valid_fraction, 0, 1, low_open=True, high_open=True)
        check_range("spatial_drop_prob", self.spatial_drop_prob, 0, 1, high_open=True)
        check_option("verbose", self.verbose, (0, 1, False, True))
        crop = self.crop_seconds
        is_number = isinstance(crop, numbers.Real) and not isinstance(crop, bool)
        if not (crop is None or (isinstance(crop, str) and crop == "auto") or is_number):
            raise ValueError(
                "Invalid value for the 'crop_seconds' parameter. Allowed values are "
                f"'auto', a positive number of seconds and None, but got {crop!r} instead."
            )
        if is_number:
            check_range("crop_seconds", crop, 0, math.inf, low_open=True)
        check_int("n_eval_crops", self.n_eval_crops, 1)
        if isinstance(self.augmentation, str):
            check_option("augmentation", self.augmentation, AUGMENTATION_PRESETS)
        if self.pretrain_window_seconds is not None:
            check_range(
                "pretrain_window_seconds", self.pretrain_window_seconds, 0, math.inf, low_open=True
            )
        if self.random_state is not None and not isinstance(self.random_state, numbers.Integral):
            raise TypeError(
                f"'random_state' must be an int or None, but got {self.random_state!r}."
            )
        self._check_device()
        if self.emb_dim % self.n_heads or self.emb_dim % 2:
            raise ValueError(
                f"'emb_dim' must be even and divisible by 'n_heads' ({self.n_heads}), but got "
                f"{self.emb_dim}."
            )
        n_masked = int(round(self.pos_mask_ratio * self.n_patches))
        pars = self.pretrain == "pars"
        if pars and self._pretrains() and n_masked < 2:
            raise ValueError(
                f"pos_mask_ratio={self.pos_mask_ratio} of n_patches={self.n_patches} masks "
                f"{n_masked} patch(es); PARS needs at least 2."
            )

    def _pretraining_settings(self):
        """lr, batch size, epochs (None: from steps), steps and crop length (s) in force."""
        if self.pretrain_preset == "paper":
            epochs = 1000 if self.pretrain_epochs is None else self.pretrain_epochs
            return dict(lr=1e-4, batch_size=512, epochs=epochs, steps=None, window=30.0)
        return dict(
            lr=self.pretrain_lr,
            batch_size=self.pretrain_batch_size,
            epochs=self.pretrain_epochs,
            steps=self.pretrain_steps,
            window=self.pretrain_window_seconds,
        )

    def _finetune_strategy(self):
        """The strategy in force: ``finetune``, with "auto" resolved."""
        if self.finetune != "auto":
            return self.finetune
        pretrained = self.pretrained_encoder is not None or self._pretrains()
        return "frozen" if pretrained else "full"

    def _crop_samples(self, n_times, sfreq, patch):
        """Samples per fine-tuning crop (``n_times``: whole windows), ``crop_seconds``
        resolved and checked against the window and the ``patch`` length (samples)."""
        if self.crop_seconds is None:
            return n_times
        if self.crop_seconds == "auto":  # half of a window of 10 s or more
            long = n_times / sfreq >= AUTO_CROP_MIN_SECONDS - 1e-6
            return n_times // 2 if long and n_times // 2 >= patch else n_times
        n_fit = int(round(self.crop_seconds * sfreq))
        if not patch <= n_fit <= n_times:
            raise ValueError(
                f"'crop_seconds' must be between one patch ({self.patch_seconds} s) and "
                f"the window ({n_times / sfreq:g} s), but got {self.crop_seconds}."
            )
        return n_fit

    def _pretrains(self):
        """Whether ``fit`` pretrains (no encoder given, a non-zero budget)."""
        return self.pretrained_encoder is None and self.pretrain_epochs != 0

    def _check_device(self):
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(
                f"Invalid value for 'device': {self.device!r} is not a torch device ({err})."
            ) from err
        if device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(
                    f"Invalid value for 'device': {self.device!r} but torch sees no GPU "
                    "(torch.cuda.is_available() is False); use device='cpu'."
                )
            if device.index is not None and device.index >= torch.cuda.device_count():
                raise ValueError(
                    f"Invalid value for 'device': {self.device!r} but torch sees "
                    f"{torch.cuda.device_count()} GPU(s)."
                )

    def _check_X(self, X, y=None, fitting=False, labels=True, name="X"):
        """Check windows (an array or braindecode windows) without copying them.

        Returns the source (an array or a dataset of window items), the labels (from
        the windows when ``y`` is None and ``labels``), the sampling rate and the
        window shape.
        """
        y = _as_labels(y)
        known_sfreq = self.sfreq if fitting else self.sfreq_
        windows = _as_windows(X, name)
        if windows is not None:
            if len(windows) == 0:
                raise ValueError(f"'{name}' holds no window.")
            sfreq = windows.sfreq()
            if sfreq is None and known_sfreq is None:
                raise ValueError(
                    f"The windows of '{name}' (a {type(X).__name__} of {len(windows)}) do not "
                    "carry their sampling rate, as the lists of items (x, y, inds) that "
                    "scikit-learn makes of braindecode windows when it splits them do not: "
                    "set 'sfreq', or pass skorch.helper.SliceDataset(windows), which keeps it."
                )
            if sfreq is None:
                sfreq = known_sfreq
            elif known_sfreq is not None and abs(known_sfreq - sfreq) > 1e-6:
                if fitting:
                    raise ValueError(
                        f"'sfreq'={known_sfreq} differs from the '{name}' windows' sampling "
                        f"rate ({sfreq} Hz)."
                    )
                raise ValueError(
                    f"'{name}' windows are sampled at {sfreq} Hz, but the classifier was "
                    f"fitted at {known_sfreq} Hz."
                )
            if y is None and labels:
                y = windows.targets()
            shape, bad = windows.shape_and_bad(name)
            source = windows
        else:
            source = np.asarray(X)
            sfreq = known_sfreq
            if sfreq is None:
                raise ValueError(
                    "Array input needs the sampling rate: set 'sfreq' (or pass braindecode "
                    "windows, which carry it)."
                )
            if source.ndim != 3:
                raise ValueError(
                    f"'{name}' must have shape (n_windows, n_chans, n_times), but got shape "
                    f"{source.shape}."
                )
            if not np.issubdtype(source.dtype, np.number):
                raise ValueError(f"'{name}' must be numeric, but got dtype {source.dtype}.")
            source = source.astype(np.float32, copy=False)
            shape = source.shape[1:]
            bad = int((~np.isfinite(source)).any(axis=(1, 2)).sum())
        if bad:
            raise ValueError(f"'{name}' holds NaN or infinite values in {bad} window(s).")
        if not fitting and tuple(shape) != (self.n_chans_, self.n_times_):
            raise ValueError(
                f"'{name}' windows have shape {tuple(shape)}, but the classifier was fitted "
                f"on {(self.n_chans_, self.n_times_)}."
            )
        return source, y, float(sfreq), tuple(shape)

    def _check_y(self, y, n, stratify=True, at_least=2):
        if y is None:
            raise ValueError("Labels are missing: pass 'y', or windows with targets.")
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValueError(f"'y' must have shape ({n},), but got {y.shape}.")
        missing = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in y])
        if missing.any():
            raise ValueError(f"Labels are missing for {int(missing.sum())} window(s).")
        classes, counts = np.unique(y, return_counts=True)
        if len(classes) < at_least:
            raise ValueError(
                f"Classification needs at least two classes, but 'y' holds only {classes.tolist()}."
            )
        if not stratify:
            return y, classes
        if counts.min() < 2:
            rare = classes[counts < 2].tolist()
            raise ValueError(
                f"Classes {rare} have a single window; the stratified validation split "
                "('valid_fraction') needs at least two windows of every class."
            )
        n_valid = int(np.ceil(self.valid_fraction * n))
        if min(n_valid, n - n_valid) < len(classes):
            raise ValueError(
                f"valid_fraction={self.valid_fraction} of {n} windows leaves {n_valid} for "
                f"validation and {n - n_valid} for training; each needs at least one window "
                f"of each of the {len(classes)} classes."
            )
        return y, classes

    def _load_pretrained(self):
        """The encoder named by ``pretrained_encoder`` (a copy), or None."""
        value = self.pretrained_encoder
        if value is None:
            return None
        if isinstance(value, PatchEncoder):
            return copy.deepcopy(value)  # never train the caller's own object
        if not isinstance(value, str | os.PathLike):
            raise TypeError(
                "'pretrained_encoder' must be the path of a saved encoder, a PatchEncoder "
                f"or None, but got {type(value).__name__} ({value!r})."
            )
        from .pretrained import PRETRAINED_ENCODERS

        if isinstance(value, str) and value in PRETRAINED_ENCODERS:
            return load_encoder(value)
        path = Path(value)
        if not path.exists():
            raise FileNotFoundError(
                f"'pretrained_encoder': there is no file or folder at '{path}', and it is "
                f"not the name of a shipped encoder ({', '.join(PRETRAINED_ENCODERS)})."
            )
        try:
            return load_encoder(path)
        except Exception as err:  # torch.load's errors say nothing of what was expected
            why = f"{type(err).__name__}: {err}"
            if "is not an encoder saved by" in str(err):  # load_encoder's own check
                why = "it holds no 'config' and 'state_dict'"
            raise ValueError(
                f"'pretrained_encoder': '{path}' is not an encoder saved by "
                f"braindecode_pars.save_encoder ({why})."
            ) from err

    def _check_pretrained(self, encoder, sfreq):
        if abs(encoder.sfreq - sfreq) > 1e-6:
            raise ValueError(
                f"The pretrained encoder works at sfreq={encoder.sfreq} Hz but the data is "
                f"at {sfreq} Hz; resample the data (it is not resampled silently)."
            )
        if abs(encoder.patch_seconds - self.patch_seconds) > 1e-9:
            raise ValueError(
                f"The pretrained encoder cuts {encoder.patch_seconds}-s patches but "
                f"'patch_seconds'={self.patch_seconds}."
            )

    def _pretraining_data(self, source, X_unlabeled, sfreq, n_times):
        """The pretraining crop length and the sources of its single-channel view.

        Checks that every source holds crops of that length, naming the culprit.
        """
        patch = int(round(self.patch_seconds * sfreq))
        window = self._pretraining_settings()["window"]
        n_crop = min(n_times, int(round(10.0 * sfreq)))
        if window is not None:
            n_crop = int(round(window * sfreq))
            if n_crop < patch:
                raise ValueError(
                    f"'pretrain_window_seconds'={self.pretrain_window_seconds} gives "
                    f"pretraining windows of {n_crop} samples, shorter than one patch "
                    f"({patch} samples)."
                )
        sources = _pretraining_sources(source)
        if n_crop > _shortest(sources):
            raise ValueError(
                f"'pretrain_window_seconds'={self.pretrain_window_seconds} gives pretraining "
                f"windows of {n_crop} samples, longer than the windows of 'X' "
                f"({_shortest(sources)} samples)."
            )
        if window is None:
            why = "10 s or the 'X' windows if shorter, as 'pretrain_window_seconds' is None"
        else:
            why = f"'pretrain_window_seconds'={self.pretrain_window_seconds}"
        for unlabeled in _unlabeled_sources(X_unlabeled, sfreq):
            if n_crop > _shortest(unlabeled):
                raise ValueError(
                    f"'X_unlabeled' holds windows of {_shortest(unlabeled)} samples, shorter "
                    f"than the pretraining windows ({n_crop} samples: {why})."
                )
            sources += unlabeled
        return n_crop, sources

    def _encoder(self, sfreq, pretrained, n_crop, sources, workdir):
        """The encoder to fine-tune: ``pretrained``, or a new one, pretrained on
        ``sources`` unless they are None."""
        if pretrained is not None:
            return pretrained, None
        encoder = PatchEncoder(
            sfreq=sfreq,
            patch_seconds=self.patch_seconds,
            emb_dim=self.emb_dim,
            depth=self.depth,
            n_heads=self.n_heads,
            ff_dim=self.ff_dim,
        )
        if sources is None:
            return encoder, None
        view = SingleChannelWindows(sources, n_times=n_crop)
        model = PRETEXT_MODELS[self.pretrain](
            n_times=n_crop, encoder=encoder, **self._pretext_params()
        )
        settings = self._pretraining_settings()
        epochs = settings["epochs"]
        valid = self.pretrain_valid_fraction or None
        if epochs is None:  # the step budget, over the windows left for training
            epochs = epochs_for_steps(settings["steps"], len(view), settings["batch_size"], valid)
        net = PretrainNet(
            model,
            max_epochs=epochs,
            batch_size=settings["batch_size"],
            lr=settings["lr"],
            optimizer__weight_decay=self.weight_decay,
            valid_fraction=valid,
            device=self.device,
            progress_bar=bool(self.verbose),
            checkpoint_dir=workdir / "pretrain",
        )
        logger.info("Pretraining %s on %d single-channel windows.", type(model).__name__, len(view))
        net.fit(view)
        return net.encoder.cpu(), net.history

    def _pretext_params(self):
        """Arguments of the pretext model named by ``pretrain``."""
        return pretext_params(self.pretrain, self.n_patches, self.pos_mask_ratio, self.mask_ratio)

    def fit(self, X, y=None, groups=None, X_unlabeled=None, X_valid=None, y_valid=None):
        """Pretrain (unless an encoder is given or ``pretrain_epochs=0``), then fine-tune.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
            Labelled windows: braindecode windows (a ``BaseConcatDataset``), skorch's
            ``SliceDataset`` or a ``torch.utils.data.Subset`` of them, or the list of
            window items ``(x, y, inds)`` scikit-learn makes of them. Labels are read
            from windows when ``y`` is None. Windows are streamed, not stacked into one
            array (pretraining on a selection of windows reads those windows into
            memory, as it reads the whole recordings of a braindecode dataset).
        y : array-like, shape (n_windows,) | SliceDataset | None
        groups : array-like, shape (n_windows,) | None
            The subject (or session) of every window. The validation split that picks
            the best epoch then holds out whole groups (about ``valid_fraction`` of
            them); with fewer than ``min_valid_groups`` groups there is no split and
            the last of ``max_epochs`` epochs is kept. Braindecode windows with a
            ``subject`` metadata column give their groups by themselves.
        X_unlabeled : windows or ndarray, like ``X`` | list of them | None
            More windows for pretraining only (e.g. recordings without labels), at
            least ``pretrain_window_seconds`` long.
        X_valid, y_valid : like ``X`` and ``y`` | None
            A fixed validation set for choosing the best epoch (the paper's splits have
            one); by default a stratified ``valid_fraction`` of ``X``.

        Returns
        -------
        self : PARSClassifier
        """
        self._check_params()
        pretrained = self._load_pretrained()
        source, y, sfreq, (n_chans, n_times) = self._check_X(X, y, fitting=True)
        if X_valid is not None:
            y, classes = self._check_y(y, len(source), stratify=False)
            v_source, y_valid, v_sfreq, v_shape = self._check_X(
                X_valid, y_valid, fitting=True, name="X_valid"
            )
            y_valid, _ = self._check_y(y_valid, len(v_source), stratify=False, at_least=1)
            if v_shape != (n_chans, n_times) or abs(v_sfreq - sfreq) > 1e-6:
                raise ValueError(
                    f"'X_valid' windows ({v_shape} at {v_sfreq} Hz) differ from 'X' "
                    f"({(n_chans, n_times)} at {sfreq} Hz)."
                )
            unknown = sorted(set(np.unique(y_valid).tolist()) - set(classes.tolist()))
            if unknown:
                raise ValueError(f"'y_valid' holds classes {unknown} that 'y' does not.")
        else:
            y, classes = self._check_y(y, len(source))
        patch = int(round(self.patch_seconds * sfreq))
        if n_times < patch:
            raise ValueError(
                f"Windows of {n_times} samples are shorter than one patch of "
                f"patch_seconds={self.patch_seconds} s ({patch} samples at {sfreq} Hz)."
            )
        n_fit = self._crop_samples(n_times, sfreq, patch)
        n_crop, pretraining_sources = None, None
        if pretrained is not None:
            self._check_pretrained(pretrained, sfreq)
        elif self._pretrains():
            n_crop, pretraining_sources = self._pretraining_data(
                source, X_unlabeled, sfreq, n_times
            )
        self.classes_ = classes
        self.sfreq_ = sfreq
        self.n_chans_, self.n_times_ = n_chans, n_times
        self.n_crop_ = n_fit
        self.finetune_ = self._finetune_strategy()
        codes = np.searchsorted(classes, y).astype(np.int64)
        if X_valid is not None:
            train = LabelledWindows(source, codes)
            valid = LabelledWindows(v_source, np.searchsorted(classes, y_valid))
        else:
            groups = self._groups(groups, source)
            train_idx, valid_idx = self._validation_split(codes, groups)
            train = LabelledWindows(source, codes, train_idx)
            valid = None if valid_idx is None else LabelledWindows(source, codes, valid_idx)

        if self.random_state is not None:
            torch.manual_seed(self.random_state)
        workdir = Path(tempfile.mkdtemp(prefix="braindecode_pars_"))
        try:
            encoder, self.pretrain_history_ = self._encoder(
                sfreq, pretrained, n_crop, pretraining_sources, workdir
            )
            module_kwargs = dict(
                n_outputs=len(classes),
                n_chans=n_chans,
                n_times=n_fit,
                sfreq=sfreq,
                encoder=encoder,
                spatial_drop_prob=self.spatial_drop_prob,
                amplitude=self.amplitude,
                n_heads=encoder.n_heads,
            )
            self._finetune(module_kwargs, train, valid, len(classes), workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        self.module_ = self.net_.module_
        self.encoder_ = self.module_.encoder
        self.history_ = self.net_.history
        return self

    def _groups(self, groups, source):
        """The group of every window: ``groups``, or the windows' ``subject`` column."""
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (len(source),):
                raise ValueError(
                    f"'groups' must have shape ({len(source)},), one group per window, but "
                    f"got {groups.shape}."
                )
            return groups
        if isinstance(source, _Windows) and source.braindecode:
            metadata = source.base.get_metadata()
            if "subject" in metadata.columns:
                subjects = metadata["subject"].to_numpy()
                return subjects if source.indices is None else subjects[source.indices]
        return None

    def _validation_split(self, codes, groups):
        """Training and validation indices; None for validation when there is no split.

        Without groups: a stratified ``valid_fraction``. With groups: whole groups, at
        least one, about ``valid_fraction`` of them, drawn so that the validation
        windows hold every class where possible; fewer than ``min_valid_groups``
        groups: no validation (the last epoch is kept).
        """
        n = len(codes)
        if groups is None:
            splitter = StratifiedShuffleSplit(
                n_splits=1, test_size=self.valid_fraction, random_state=self.random_state
            )
            return next(splitter.split(np.zeros(n), codes))
        unique = np.unique(groups)
        if len(unique) < self.min_valid_groups:
            logger.info(
                "%d group(s) < min_valid_groups=%d: training on every window for %d epochs, "
                "keeping the last.",
                len(unique),
                self.min_valid_groups,
                self.max_epochs,
            )
            return np.arange(n), None
        n_valid = max(1, int(round(self.valid_fraction * len(unique))))
        rng = np.random.default_rng(self.random_state)
        n_classes = len(np.unique(codes))
        for _ in range(100):  # prefer a draw whose validation windows hold every class
            held = rng.choice(unique, n_valid, replace=False)
            valid = np.isin(groups, held)
            if len(np.unique(codes[valid])) == n_classes == len(np.unique(codes[~valid])):
                break
        return np.flatnonzero(~valid), np.flatnonzero(valid)

    def _finetune(self, module_kwargs, train, valid, n_classes, workdir):
        """Fine-tune with the chosen strategy; sets ``net_``."""
        encoder = module_kwargs["encoder"]
        y_train = train.codes[train.indices]
        if self._crops():
            train = RandomCrops(train, self.n_crop_)
            if valid is not None:
                valid = FixedCrops(valid, self.n_crop_, self._eval_starts())

        def make(max_epochs, lr, param_groups=None):
            net = make_finetune_net(
                MultiChannelClassifier,
                module_kwargs,
                y_train,
                n_classes,
                checkpoint_dir=workdir / "finetune",
                valid_dataset=valid,
                validation=valid is not None,
                max_epochs=max_epochs,
                batch_size=self.batch_size,
                lr=lr,
                weight_decay=self.weight_decay,
                device=self.device,
                progress_bar=bool(self.verbose),
                transforms=self._augmentation(),
                optimizer_param_groups=param_groups,
            )
            net.set_params(verbose=int(self.verbose))  # skorch's epoch table
            return net

        encoder_groups = None
        if self.encoder_lr_scale != 1.0:
            encoder_groups = [("encoder.*", {"lr": self.lr * self.encoder_lr_scale})]
        strategy = self.finetune_
        if strategy == "full":
            self.net_ = make(self.max_epochs, self.lr, encoder_groups)
            self.net_.fit(train, y=None)
            return
        # frozen, and the first stage of lp-ft: the encoder as a fixed feature extractor
        encoder.requires_grad_(False)
        probe_epochs = self.max_epochs if strategy == "frozen" else max(1, self.max_epochs // 2)
        self.net_ = make(probe_epochs, self.lr)
        self.net_.fit(train, y=None)
        encoder.requires_grad_(True)
        if strategy == "frozen":
            return
        # lp-ft: every weight, the encoder at lr * encoder_lr_scale, from the probe
        self.net_.set_params(
            lr=self.lr,
            optimizer__param_groups=[("encoder.*", {"lr": self.lr * self.encoder_lr_scale})],
        )
        self.net_.initialize_optimizer()
        self.net_.partial_fit(train, y=None, epochs=self.max_epochs - probe_epochs)

    def predict_proba(self, X):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_`` order."""
        check_is_fitted(self, "net_")
        source, _, _, _ = self._check_X(X, labels=False)
        return self._predict_proba(source)

    def _augmentation(self):
        if self.augmentation == "standard":
            return standard_augmentation(self.sfreq_, random_state=self.random_state)
        return self.augmentation

    def _crops(self):
        """Whether the model was fitted on crops (estimators fitted before crops: no)."""
        return getattr(self, "n_crop_", self.n_times_) < self.n_times_

    def _eval_starts(self):
        return crop_starts(self.n_times_, self.n_crop_, self.n_eval_crops)

    def _predict_proba(self, source):
        windows = LabelledWindows(source, np.zeros(len(source)))
        if not self._crops():
            return self.net_.predict_proba(windows)
        crops = FixedCrops(windows, self.n_crop_, self._eval_starts())
        return crops.average(self.net_.predict_proba(crops))

    def predict(self, X):
        """Predicted labels, shape (n_windows,)."""
        check_is_fitted(self, "net_")
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def score(self, X, y=None, sample_weight=None):
        """Accuracy on ``X``; labels are read from windows when ``y`` is None.

        Parameters
        ----------
        X : like ``X`` of :meth:`fit`
        y : array-like, shape (n_windows,) | SliceDataset | None
        sample_weight : array-like, shape (n_windows,) | None

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "net_")
        source, y, _, _ = self._check_X(X, y)
        if y is None:
            raise ValueError("Labels are missing: pass 'y', or windows with targets.")
        predicted = self.classes_[self._predict_proba(source).argmax(axis=1)]
        return accuracy_score(y, predicted, sample_weight=sample_weight)


def _pretraining_sources(source):
    """What :class:`SingleChannelWindows` reads of ``X``: an array or windows."""
    return source.pretraining_sources() if isinstance(source, _Windows) else [source]


def _unlabeled_sources(X_unlabeled, sfreq):
    """The sources of ``X_unlabeled`` for :class:`SingleChannelWindows`, checked."""
    if X_unlabeled is None:
        return []
    one = not isinstance(X_unlabeled, list | tuple) or _is_window_items(X_unlabeled)
    checked = []
    for source in [X_unlabeled] if one else X_unlabeled:
        windows = _as_windows(source, "X_unlabeled")
        if windows is None:
            array = np.asarray(source)
            if array.ndim != 3 or not np.issubdtype(array.dtype, np.number):
                raise ValueError(
                    "'X_unlabeled' arrays must be numeric, of shape (n_windows, n_chans, "
                    f"n_times), but got shape {array.shape} and dtype {array.dtype}."
                )
            checked.append([array])
            continue
        if len(windows) == 0:
            raise ValueError("'X_unlabeled' holds no window.")
        own = windows.sfreq()
        if own is not None and abs(own - sfreq) > 1e-6:
            raise ValueError(
                f"'X_unlabeled' windows are sampled at {own} Hz but 'X' at {sfreq} Hz."
            )
        checked.append(windows.pretraining_sources())
    return checked
