"""PARSClassifier: pretrain a single-channel encoder, then fine-tune it, in one ``fit``."""

from __future__ import annotations

import copy
import logging
import math
import numbers
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from braindecode.datasets import BaseConcatDataset
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.utils.validation import check_is_fitted

from ._checks import check_int, check_option, check_range
from .datasets.single_channel import SingleChannelWindows
from .models import PRETEXT_MODELS, pretext_params
from .models.classifier import MultiChannelClassifier
from .models.encoder import PatchEncoder
from .training.checkpoints import load_encoder
from .training.finetune import make_finetune_net
from .training.pretrain import PretrainNet

logger = logging.getLogger(__name__)


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

    ``source`` is an array (n_windows, n_chans, n_times) or braindecode windows; nothing
    is copied, so a windows dataset is streamed from its recordings.
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


def _windows_shape_and_bad(windows):
    """(n_chans, n_times) of braindecode windows, and how many hold NaN or inf.

    Reads preloaded recordings in place (one slice per window); other windows one by
    one. Raises if the windows do not all have one shape.
    """
    shapes, bad = set(), 0
    for ds in windows.datasets:
        raw = getattr(ds, "raw", None)
        if raw is not None and getattr(raw, "preload", False):
            data = raw._data
            for _, start, stop in ds.crop_inds:
                window = data[:, start:stop]
                shapes.add(window.shape)
                bad += int(not np.isfinite(window).all())
        else:
            for i in range(len(ds)):
                window = np.asarray(ds[i][0])
                shapes.add(window.shape)
                bad += int(not np.isfinite(window).all())
    if len(shapes) != 1:
        raise ValueError(
            f"'X' windows must all have one shape (n_chans, n_times), but got {sorted(shapes)}."
        )
    return shapes.pop(), bad


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

    Parameters
    ----------
    pretrain : {"pars", "mae", "mp3", "droppos"}
        The pretext task. All share the encoder, the pretraining net and its settings.
    pretrained_encoder : str | Path | PatchEncoder | None
        An encoder saved by :func:`~braindecode_pars.training.save_encoder` (or an
        instance; it is copied). Its sampling rate and patch length must match.
    emb_dim, depth, n_heads, ff_dim, patch_seconds
        Encoder size; defaults are the paper's (512, 8, 8, 512, 1 s).
    n_patches, pos_mask_ratio
        PARS settings; paper: 40 patches, 0.8. ``pos_mask_ratio`` is also DropPos's
        ``gamma_pos``.
    mask_ratio : float
        Share of patches removed (MAE, DropPos) or hidden from keys and values (MP3).
    pretrain_window_seconds : float | None
        Length of the pretraining crops; default: the fine-tuning window.
    pretrain_epochs : int
        Pretraining epochs (paper: 1000 on a large corpus); 0 for no pretraining.
    pretrain_batch_size : int
        Paper: 512.
    max_epochs : int
        Fine-tuning epochs. Paper: 200.
    batch_size : int
        Fine-tuning batch size.
    lr, weight_decay : float
        AdamW settings of both stages. Paper: 1e-4 and 1e-4.
    valid_fraction : float
        Stratified share of the training windows used to pick the best epoch.
    spatial_drop_prob : float
        Spatial-token dropout of the fine-tuning model. Paper: 0.5.
    augmentation : list of braindecode Transform | None
        Augmentations of the fine-tuning batches, e.g.
        :class:`~braindecode_pars.datasets.eesm17.ChannelNoise` as the paper uses on
        EESM17.
    sfreq : float | None
        Sampling rate of array input; read from braindecode windows otherwise.
    device : str
        ``"cpu"`` or ``"cuda"``.
    random_state : int | None
        Seed of every random draw: the same seed gives the same predictions.
    verbose : int
        0: quiet; 1: progress bars.

    Attributes
    ----------
    classes_ : ndarray
        The labels seen in ``fit``.
    encoder_ : PatchEncoder
        The fine-tuned encoder.
    module_ : MultiChannelClassifier
        The fine-tuned model.
    net_ : braindecode.EEGClassifier
        The fine-tuning net; ``history_`` is its history.
    pretrain_history_ : skorch History | None
        The pretraining history, if pretraining ran.

    Examples
    --------
    >>> from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    >>> clf = PARSClassifier(emb_dim=64, depth=2, n_heads=4, ff_dim=64, n_patches=8,
    ...                      pretrain_epochs=5, max_epochs=20, sfreq=200)
    >>> cross_val_score(clf, X, y, groups=runs, cv=LeaveOneGroupOut())  # doctest: +SKIP
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
        pretrain_epochs=100,
        pretrain_batch_size=512,
        max_epochs=200,
        batch_size=64,
        lr=1e-4,
        weight_decay=1e-4,
        valid_fraction=0.2,
        spatial_drop_prob=0.5,
        augmentation=None,
        sfreq=None,
        device="cpu",
        random_state=None,
        verbose=0,
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
        self.pretrain_batch_size = pretrain_batch_size
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.valid_fraction = valid_fraction
        self.spatial_drop_prob = spatial_drop_prob
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
        check_int("pretrain_epochs", self.pretrain_epochs, 0)
        check_int("batch_size", self.batch_size, 1)
        check_int("pretrain_batch_size", self.pretrain_batch_size, 1)
        check_range("pos_mask_ratio", self.pos_mask_ratio, 0, 1, low_open=True)
        check_range("patch_seconds", self.patch_seconds, 0, math.inf, low_open=True)
        check_range("lr", self.lr, 0, math.inf, low_open=True)
        check_range("weight_decay", self.weight_decay, 0, math.inf)
        check_range("valid_fraction", self.valid_fraction, 0, 1, low_open=True, high_open=True)
        check_range("spatial_drop_prob", self.spatial_drop_prob, 0, 1, high_open=True)
        check_option("verbose", self.verbose, (0, 1, False, True))
        if self.pretrain_window_seconds is not None:
            check_range(
                "pretrain_window_seconds", self.pretrain_window_seconds, 0, math.inf, low_open=True
            )
        if self.random_state is not None and not isinstance(self.random_state, numbers.Integral):
            raise TypeError(
                f"'random_state' must be an int or None, but got {self.random_state!r}."
            )
        if self.emb_dim % self.n_heads or self.emb_dim % 2:
            raise ValueError(
                f"'emb_dim' must be even and divisible by 'n_heads' ({self.n_heads}), but got "
                f"{self.emb_dim}."
            )
        n_masked = int(round(self.pos_mask_ratio * self.n_patches))
        pars = self.pretrain == "pars"
        if pars and self.pretrain_epochs > 0 and self.pretrained_encoder is None and n_masked < 2:
            raise ValueError(
                f"pos_mask_ratio={self.pos_mask_ratio} of n_patches={self.n_patches} masks "
                f"{n_masked} patch(es); PARS needs at least 2."
            )

    def _check_X(self, X, y=None, fitting=False):
        """Check windows (an array or braindecode windows) without copying them.

        Returns the source (an array or the windows dataset), the labels (from the
        windows' metadata when ``y`` is None), the sampling rate and the window shape.
        """
        if isinstance(X, BaseConcatDataset):
            if len(X) == 0:
                raise ValueError("'X' holds no window.")
            sfreq = _windows_sfreq(X)
            if y is None and "target" in X.get_metadata().columns:
                y = X.get_metadata()["target"].to_numpy()
            if fitting and self.sfreq is not None and abs(self.sfreq - sfreq) > 1e-6:
                raise ValueError(
                    f"'sfreq'={self.sfreq} differs from the windows' sampling rate ({sfreq} Hz)."
                )
            shape, bad = _windows_shape_and_bad(X)
            source = X
        else:
            source = np.asarray(X)
            sfreq = self.sfreq if fitting else self.sfreq_
            if sfreq is None:
                raise ValueError(
                    "Array input needs the sampling rate: set 'sfreq' (or pass braindecode "
                    "windows, which carry it)."
                )
            if source.ndim != 3:
                raise ValueError(
                    "'X' must have shape (n_windows, n_chans, n_times), but got shape "
                    f"{source.shape}."
                )
            if not np.issubdtype(source.dtype, np.number):
                raise ValueError(f"'X' must be numeric, but got dtype {source.dtype}.")
            source = source.astype(np.float32, copy=False)
            shape = source.shape[1:]
            bad = int((~np.isfinite(source)).any(axis=(1, 2)).sum())
        if bad:
            raise ValueError(f"'X' holds NaN or infinite values in {bad} window(s).")
        if not fitting and tuple(shape) != (self.n_chans_, self.n_times_):
            raise ValueError(
                f"'X' windows have shape {tuple(shape)}, but the classifier was fitted on "
                f"{(self.n_chans_, self.n_times_)}."
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

    # -- stages --------------------------------------------------------------------------
    def _encoder(self, sfreq, n_times, X, X_unlabeled, workdir):
        patch = int(round(self.patch_seconds * sfreq))
        if self.pretrained_encoder is not None:
            encoder = load_encoder(self.pretrained_encoder)
            if encoder is self.pretrained_encoder:  # never train the caller's own object
                encoder = copy.deepcopy(encoder)
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
            return encoder, None
        encoder = PatchEncoder(
            sfreq=sfreq,
            patch_seconds=self.patch_seconds,
            emb_dim=self.emb_dim,
            depth=self.depth,
            n_heads=self.n_heads,
            ff_dim=self.ff_dim,
        )
        if self.pretrain_epochs == 0:
            return encoder, None
        pre_times = n_times
        if self.pretrain_window_seconds is not None:
            pre_times = int(round(self.pretrain_window_seconds * sfreq))
        sources = [X] + ([] if X_unlabeled is None else _as_list(X_unlabeled))
        view = SingleChannelWindows(sources, n_times=pre_times)
        if pre_times < patch:
            raise ValueError(f"Pretraining windows of {pre_times} samples hold no patch.")
        model = PRETEXT_MODELS[self.pretrain](
            n_times=pre_times, encoder=encoder, **self._pretext_params()
        )
        net = PretrainNet(
            model,
            max_epochs=self.pretrain_epochs,
            batch_size=self.pretrain_batch_size,
            lr=self.lr,
            optimizer__weight_decay=self.weight_decay,
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

    def fit(self, X, y=None, X_unlabeled=None, X_valid=None, y_valid=None):
        """Pretrain (unless an encoder is given or ``pretrain_epochs=0``), then fine-tune.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            Labelled windows; labels are read from braindecode windows when ``y`` is
            None. Windows datasets are streamed, not copied into memory.
        y : array-like, shape (n_windows,) | None
        X_unlabeled : braindecode BaseConcatDataset | ndarray | list of them | None
            More windows for pretraining only (e.g. recordings without labels).
        X_valid, y_valid : like ``X`` and ``y`` | None
            A fixed validation set for choosing the best epoch (the paper's splits have
            one); by default a stratified ``valid_fraction`` of ``X``.

        Returns
        -------
        self : PARSClassifier
        """
        self._check_params()
        source, y, sfreq, (n_chans, n_times) = self._check_X(X, y, fitting=True)
        if X_valid is not None:
            y, classes = self._check_y(y, len(source), stratify=False)
            v_source, y_valid, v_sfreq, v_shape = self._check_X(X_valid, y_valid, fitting=True)
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
        self.classes_ = classes
        self.sfreq_ = sfreq
        self.n_chans_, self.n_times_ = n_chans, n_times
        codes = np.searchsorted(classes, y).astype(np.int64)
        if X_valid is not None:
            train = LabelledWindows(source, codes)
            valid = LabelledWindows(v_source, np.searchsorted(classes, y_valid))
        else:
            splitter = StratifiedShuffleSplit(
                n_splits=1, test_size=self.valid_fraction, random_state=self.random_state
            )
            train_idx, valid_idx = next(splitter.split(np.zeros(len(codes)), codes))
            train = LabelledWindows(source, codes, train_idx)
            valid = LabelledWindows(source, codes, valid_idx)

        if self.random_state is not None:
            torch.manual_seed(self.random_state)
        workdir = Path(tempfile.mkdtemp(prefix="braindecode_pars_"))
        try:
            encoder, self.pretrain_history_ = self._encoder(
                sfreq, n_times, source, X_unlabeled, workdir
            )
            module_kwargs = dict(
                n_outputs=len(classes),
                n_chans=n_chans,
                n_times=n_times,
                sfreq=sfreq,
                encoder=encoder,
                spatial_drop_prob=self.spatial_drop_prob,
                n_heads=encoder.n_heads,
            )
            self.net_ = make_finetune_net(
                MultiChannelClassifier,
                module_kwargs,
                train.codes[train.indices],
                len(classes),
                checkpoint_dir=workdir / "finetune",
                valid_dataset=valid,
                max_epochs=self.max_epochs,
                batch_size=self.batch_size,
                lr=self.lr,
                weight_decay=self.weight_decay,
                device=self.device,
                progress_bar=bool(self.verbose),
                transforms=self.augmentation,
            )
            self.net_.fit(train, y=None)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        self.module_ = self.net_.module_
        self.encoder_ = self.module_.encoder
        self.history_ = self.net_.history
        return self

    def predict_proba(self, X):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_`` order."""
        check_is_fitted(self, "net_")
        source, _, _, _ = self._check_X(X)
        return self.net_.predict_proba(LabelledWindows(source, np.zeros(len(source))))

    def predict(self, X):
        """Predicted labels, shape (n_windows,)."""
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


def _as_list(x):
    return list(x) if isinstance(x, list | tuple) else [x]
