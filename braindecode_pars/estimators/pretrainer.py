"""PARSPretrainer: the encoder stage, a scikit-learn transformer that pretrains a
:class:`~braindecode_pars.PatchEncoder` with PARS (or a baseline pretext task)."""

from __future__ import annotations

import functools
import logging
import numbers
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted
from skorch.callbacks import Callback

from braindecode_pars._util.checks import (
    check_device,
    check_heads,
    check_option,
    fewest_patches,
)
from braindecode_pars._util.logs import verbose_logging, warn_once
from braindecode_pars._util.params import store_params
from braindecode_pars._util.seeding import fit_seed, isolated_random_state
from braindecode_pars._util.threads import with_fit_threads
from braindecode_pars.estimators._inputs import (
    SeededWindowsMixin,
    check_encoder_rate,
    check_window_length,
    load_encoder_param,
)
from braindecode_pars.io.estimator_inputs import read_input
from braindecode_pars.io.windows import Windows, read_windows, windows_sfreq
from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.models.encoder_config import ENCODER_SIZES, PatchEncoderConfig
from braindecode_pars.models.pair.kernels import DECODER_KERNEL_OPTIONS
from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.pretraining.config import (
    COMPILE_MODES,
    DEFAULT_CROP_SECONDS,
    PAPER,
    PATCHES_PER_SECOND,
    PretrainConfig,
)
from braindecode_pars.pretraining.net import BATCHES
from braindecode_pars.pretraining.stopping import TrainingStopped, resolve_stop_signals

logger = logging.getLogger(__name__)

_SMALL = ENCODER_SIZES["small"]


def _as_sources(X_unlabeled):
    """``X_unlabeled`` as a list of sources: None gives none, a list or tuple of sources
    is one per item, anything else (including a list of window items ``(x, y, ...)``)
    is one source."""
    if X_unlabeled is None:
        return []
    one = not isinstance(X_unlabeled, list | tuple) or (
        len(X_unlabeled) > 0 and isinstance(X_unlabeled[0], tuple)
    )
    return [X_unlabeled] if one else list(X_unlabeled)


def _encoder_name(value):
    """How the log names an ``init_encoder`` value: a shipped name or a path as given, in
    quotes; an instance by its class (None for none)."""
    if value is None:
        return None
    if isinstance(value, str | Path):
        return repr(str(value))
    return f"the {type(value).__name__} given"


#: The pairs of position-masked patches, over all draws, that :func:`_draw_overlap`
#: compares at most (its memory), and its most and fewest draws.
_OVERLAP_PAIRS, _OVERLAP_DRAWS = 2**22, (16, 1024)


@functools.lru_cache(maxsize=32)  # a seeded draw: the same for the same settings
def _draw_overlap(n_crop, sfreq, patch_seconds, n_patches, pos_mask_ratio):
    """:func:`~braindecode_pars.models.pretext.patch_overlap` of PARS's own random draws
    (:meth:`~braindecode_pars.PARS.sample_patches`, seed 0) in a crop of ``n_crop``
    samples, with ``n_draws``, their number (fewer for many patches)."""
    import torch

    from braindecode_pars.models.pretext import PARS

    tiny = dict(emb_dim=8, depth=1, n_heads=1, ff_dim=8)  # only the draw is read
    model = PARS(
        n_times=n_crop, sfreq=sfreq, patch_seconds=patch_seconds, n_patches=n_patches,
        pos_mask_ratio=pos_mask_ratio, **tiny,
    )  # fmt: skip
    fewest, most = _OVERLAP_DRAWS
    n_draws = min(most, max(fewest, _OVERLAP_PAIRS // model.n_masked**2))
    stats = model.overlap_statistics(n_draws, generator=torch.Generator().manual_seed(0))
    return {**stats, "n_draws": n_draws}


class PARSPretrainer(SeededWindowsMixin, TransformerMixin, BaseEstimator):
    """Pretrain a single-channel :class:`~braindecode_pars.PatchEncoder` on windows.

    ``fit`` draws one random channel of a random crop of each window (of ``X`` and
    ``X_unlabeled``; labels are not used) and trains the encoder with a pretext
    task: PARS (the paper's: predict the time shift between every pair of
    position-masked patches), MAE, MP3 or DropPos, through skorch
    (:class:`~braindecode_pars.PretrainNet`). ``transform`` gives each window's
    per-channel features from the pretrained encoder. It is the encoder stage of
    :class:`~braindecode_pars.PARSClassifier` (``encoder=PARSPretrainer(...)``,
    parameters ``encoder__<name>``), and is usable alone.

    **What to expect**: minutes per fit on a CPU at the default 3,000 steps of the
    small encoder; the pretext skill reached and what the encoder adds to a probe
    are on the benchmarks page (:doc:`/benchmarks`).

    Parameters
    ----------
    method : {"pars", "mae", "mp3", "droppos"}
        The pretext task.
    init_encoder : str | Path | PatchEncoder | None
        None: pretrain a new encoder of the size the parameters below give. A shipped
        name (``"pars-small"``), a saved encoder file or folder, or a
        :class:`~braindecode_pars.PatchEncoder`: pretext training continues from its
        weights (a copy; its size and sampling rate then hold, and the size parameters
        must be left at their defaults or equal it). The pretext model's decoder starts
        anew. The first log line says so, naming the encoder, its size, the rate and the
        warm-up. With ``X_target_unlabeled`` in :class:`~braindecode_pars.PARSClassifier`,
        ``PARSPretrainer(init_encoder="pars-small", steps=500)`` adapts a shipped
        encoder to the test subjects' own unlabelled EEG (transductive). With
        ``max_epochs=0`` the encoder is used as it is. **Rate for continuing**: ``lr``
        and the warm-up are those of pretraining from scratch unless set (1e-3, warmed
        up over the first 10 % of the steps, which this estimator always does); the
        package's example of continued pretraining
        (``examples/plot_pars_physionet_mi.py``) runs at 3e-4 without warm-up
        (:class:`~braindecode_pars.PretrainNet`'s ``warmup_fraction=0``), so
        ``lr=3e-4`` is the one to start from. Neither has been measured against the
        other for continuing yet (:doc:`/usage`, "Continuing pretraining").
    patch_seconds, emb_dim, depth, n_heads, ff_dim, activation, drop_prob, eps
        The new encoder's settings
        (:class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`);
        the defaults are the small size (``ENCODER_SIZES["small"]``: 64 features, 4
        blocks of 4 heads, feed-forward 128, 140 k parameters), which pretrains on a
        CPU; ``PARSPretrainer(**ENCODER_SIZES["paper"])`` is the paper's 512 x 8
        (12.7 M parameters, for a GPU).
    normalization : {"window", "window+scale", "fixed"}
        The new encoder's input normalisation
        (:class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`):
        ``"window"``, blind to amplitude (the paper's and the shipped encoders'); the
        two others read amplitude, in ``unit`` (``"window+scale"`` takes the statistics
        of its scale embedding from the windows it pretrains on).
    unit : {"uV", "V"}
        The unit of ``X`` that an amplitude-aware normalisation reads (microvolts: what
        the package's readers and braindecode's estimators give).
    n_patches : int | None
        PARS's patches per crop. None: scaled with the crop at the default density,
        ``round(PATCHES_PER_SECOND * crop seconds)``
        (:data:`~braindecode_pars.pretraining.config.PATCHES_PER_SECOND`, 4 per second:
        40 in the default 10-s crops, 16 in 4-s windows), and with ``preset="paper"`` at
        the paper's 40 per 30-s crop; never fewer than PARS needs (2 position-masked
        patches at ``pos_mask_ratio``). An int is taken as given. The number in force is
        ``n_patches_``. Patches drawn from crops shorter than 10 s, or more densely than
        the default, share samples so often that a shift can be read by aligning them:
        ``fit`` then warns with the overlap statistics of the draw
        (:func:`~braindecode_pars.models.pretext.patch_overlap`).
    pos_mask_ratio : float
        PARS's share of patches without a position (paper: 0.8); also DropPos's
        ``gamma_pos``.
    mask_ratio : float
        Share of patches removed (MAE, DropPos) or hidden from keys and values (MP3).
    decoder_heads : int
        Attention heads of PARS's pair decoder.
    sampling : {"random", "disjoint", "fixed"}
        PARS's patch starts: uniform (the paper's), non-overlapping, or on a grid
        (see :class:`~braindecode_pars.PARS`).
    window_seconds : float | None
        Length of the pretraining crops; None: 10 s, or the windows of ``X`` when
        shorter (paper: 30 s). Windows of ``X_unlabeled`` must be at least this long.
    max_epochs : int | None
        Pretraining epochs; None: as many as ``steps`` optimiser steps take; 0: no
        pretraining, a randomly initialised encoder (training from scratch).
    steps : int
        The budget in optimiser steps when ``max_epochs`` is None.
    batch_size, lr, weight_decay
        Batch size, maximum learning rate (warm-up, then cosine) and AdamW's weight
        decay.
    valid_fraction : float | None
        Share held out to measure the pretext skill (``history_``'s ``valid_skill``):
        whole groups when ``fit`` has groups, else whole windows.
    preset : {None, "paper"}
        ``"paper"``: the paper's lr 1e-4, batch 512, 1000 epochs and 30-s crops, for a
        corpus of its size.
    checkpoint_dir : str | Path | None
        Where pretraining keeps its resumable state (``<checkpoint_dir>/pretrain``): a
        rerun resumes it, and an interrupted fit loses no finished epoch. None: no file.
    stop_signals : "auto" | str | int | sequence | None
        Signals that stop pretraining cleanly, as a cluster's scheduler does (SIGTERM at
        a time limit; SLURM's ``--signal`` may send another first, e.g. ``"SIGUSR1"``):
        the state is saved in ``checkpoint_dir`` at the next step boundary and ``fit``
        raises :class:`~braindecode_pars.pretraining.TrainingStopped` (its ``reason``
        ``"signal"``; ``sys.exit(err.exit_code)`` gives the scheduler
        ``128 + signal``); a rerun continues from that step. See
        :class:`~braindecode_pars.pretraining.PretrainNet`. ``"auto"`` (the default):
        SIGTERM when ``checkpoint_dir`` is set, none otherwise, so that a fit with
        nothing to save leaves SIGTERM its default action (it ends the process, as a
        joblib, Dask or Ray worker, or a notebook's kernel, expects). Ctrl-C is not one
        of them; None: no signal is caught.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    device : str
        Torch device of pretraining.
    amp : bool | "auto"
        Run the forward pass under bf16 autocast (``torch.autocast``); "auto": on a
        CUDA device, not on a CPU (where bf16 is slower than float32). The losses stay
        within about 1 % of float32's on the same draws.
    compile : bool | "auto"
        ``torch.compile`` the pretext model (PARS compiles with no graph break); the
        first step then holds the compilation (tens of seconds). "auto": on a CUDA
        device, not on a CPU.
    compile_mode : {None, "default", "reduce-overhead", "max-autotune", \
            "max-autotune-no-cudagraphs"}
        ``torch.compile``'s mode when the model is compiled (None: torch's default).
        "reduce-overhead" replays each training step as CUDA graphs on a GPU, which
        saves the launch of its kernels (:doc:`/benchmarks/speed`);
        a step boundary is marked before every step, the logged losses are copies, and
        the patches and masks are drawn anew at every replay.
    batches : {"auto", "host", "read-ahead", "device"}
        How the training batches reach the step
        (:class:`~braindecode_pars.pretraining.PretrainNet`'s ``batches``): their crops
        drawn in the loop and copied by the step, drawn ahead by a thread (and copied on
        a side stream on CUDA), or drawn on the device from the windows uploaded once
        (at most 2 GiB). "auto": the device type's default ("host" until a GPU timing
        decides).
    decoder_kernel : {"auto", "tables", "fused"}
        PARS's pair operator (``PARS(decoder_kernel=...)``): torch operations over the
        factor tables, or one Triton kernel each way where Triton runs (CUDA); the same
        values either way. "auto": the device type's default ("tables" until a GPU
        timing decides). Other methods ignore it.
    random_state : int | None
        Seed of every draw (initialisation, crops, channels, patches, masks, batch
        order, the validation split); None: a fresh seed. The global generators are
        left as they were.
    monitor : ProbeMonitor | None
        Probes of the frozen encoder logged while it pretrains
        (:class:`~braindecode_pars.pretraining.ProbeMonitor`: a label probe across
        subjects and a subject probe on a small labelled set, at the report cadence;
        ``history_`` holds them and
        :func:`~braindecode_pars.viz.plot_training_curves` draws them).
    verbose : int
        0: silent; 1: one line before pretraining and one per epoch; 2: the epoch table.

    Attributes
    ----------
    encoder_ : PatchEncoder
        The pretrained encoder, on the CPU, in evaluation mode.
    config_ : PatchEncoderConfig
    history_ : skorch History | None
        The pretraining history (None with ``max_epochs=0``).
    sfreq_ : float
    n_crop_ : int | None
        Samples per pretraining crop (None without pretraining).
    n_patches_ : int | None
        PARS's patches per crop in force: ``n_patches``, or with None the number scaled
        with the crop (None without PARS pretraining); the run's record states it.
    """

    # under metadata routing, groups reach fit (the held-out subjects of the pretext
    # skill), as for the heads
    __metadata_request__fit = {"groups": True}

    def __init__(
        self,
        method="pars",
        *,
        init_encoder=None,
        patch_seconds=1.0,
        emb_dim=_SMALL["emb_dim"],
        depth=_SMALL["depth"],
        n_heads=_SMALL["n_heads"],
        ff_dim=_SMALL["ff_dim"],
        activation="gelu",
        drop_prob=0.0,
        eps=1e-5,
        normalization="window",
        unit="uV",
        n_patches=None,
        pos_mask_ratio=0.8,
        mask_ratio=0.75,
        decoder_heads=8,
        sampling="random",
        window_seconds=None,
        max_epochs=None,
        steps=3000,
        batch_size=64,
        lr=1e-3,
        weight_decay=1e-4,
        valid_fraction=0.1,
        preset=None,
        checkpoint_dir=None,
        stop_signals="auto",
        sfreq=None,
        device="cpu",
        amp="auto",
        compile="auto",
        compile_mode=None,
        batches="auto",
        decoder_kernel="auto",
        random_state=None,
        monitor=None,
        verbose=1,
    ):
        store_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    # -- checks and settings -------------------------------------------------------------
    def check_params(self):
        """Check every parameter without data, as ``fit`` does first
        (:class:`~braindecode_pars.PARSClassifier` calls it before reading any window).

        Returns
        -------
        config : PatchEncoderConfig
            The encoder's settings (the initial encoder's, with ``init_encoder``).
        initial : PatchEncoder | None
            A copy of the initial encoder.
        """
        self.pretrain_config()  # the pretext and optimisation settings, checked
        if self.monitor is not None and not isinstance(self.monitor, Callback):
            raise TypeError(
                "'monitor' must be a ProbeMonitor (a skorch Callback) or None, but got "
                f"{type(self.monitor).__name__}."
            )
        config = PatchEncoderConfig.of(self)
        initial = load_encoder_param(self.init_encoder, name="init_encoder")
        if initial is not None:
            config = self._initial_config(config, initial)
        check_heads("decoder_heads", self.decoder_heads, config.emb_dim)
        check_option("preset", self.preset, (None, "paper"))
        check_device("device", self.device)
        check_option("amp", self.amp, (True, False, "auto"))
        check_option("compile", self.compile, (True, False, "auto"))
        check_option("compile_mode", self.compile_mode, COMPILE_MODES)
        check_option("batches", self.batches, BATCHES)
        check_option("decoder_kernel", self.decoder_kernel, DECODER_KERNEL_OPTIONS)
        check_option("verbose", self.verbose, (0, 1, 2, False, True))
        resolve_stop_signals(self.stop_signals, self.checkpoint_dir)
        fit_seed(self.random_state if self.random_state is not None else 0)  # type check
        return config, initial  # PARS's masked patches: checked by pretrain_config()

    @staticmethod
    def _initial_config(config, initial):
        """The initial encoder's settings, refusing size parameters set to other values."""
        given = config.asdict()
        default = PatchEncoderConfig.of(PARSPretrainer()).asdict()
        theirs = initial.config.asdict()
        clash = {
            k: (given[k], theirs[k])
            for k in given
            if given[k] != default[k] and given[k] != theirs[k]
        }
        if clash:
            said = ", ".join(f"{k}={a!r} (init_encoder has {b!r})" for k, (a, b) in clash.items())
            raise ValueError(
                f"'init_encoder' fixes the encoder's size, but the parameters ask for another: "
                f"{said}; leave them at their defaults or set init_encoder=None."
            )
        return initial.config

    def _on_cuda(self, value):
        """A bool or "auto" setting in force: "auto" is True on a CUDA device."""
        if value == "auto":
            import torch

            return torch.device(self.device).type == "cuda"
        return bool(value)

    def _pretrains(self):
        return self.max_epochs != 0

    def pretrain_config(self, crop_seconds=None):
        """The pretext and optimisation settings in force, checked: the parameters, or
        with ``preset="paper"`` the paper's optimisation
        (:data:`~braindecode_pars.pretraining.config.PAPER`) in place of theirs.

        Parameters
        ----------
        crop_seconds : float | None
            The length of the pretraining crops, which ``n_patches=None`` scales with;
            None: the crops the parameters give before the windows are seen
            (``window_seconds``, 30 s with ``preset="paper"``, else 10 s).

        Returns
        -------
        config : PretrainConfig
        """
        self._check_n_patches()
        n_patches = self.n_patches
        if n_patches is None:  # the settings are checked with the fewest, then scaled
            n_patches = fewest_patches(self.pos_mask_ratio) if self._pars() else 1
        config = PretrainConfig.of(self, n_patches=n_patches)
        if self.preset == "paper":
            config = config.with_paper_optimisation()  # the epochs given stay
            if self.max_epochs is not None:
                config = config.replace(max_epochs=self.max_epochs)
        if self.n_patches is None:
            seconds = crop_seconds or config.window_seconds or DEFAULT_CROP_SECONDS
            config = config.with_patches_for(seconds, self._patch_density()[0])
        return config

    def _pars(self):
        """Whether the fit pretrains with PARS (the one method that reads
        ``n_patches``)."""
        return self.method == "pars" and self._pretrains()

    def _patch_density(self):
        """The density ``n_patches=None`` scales with, in patches per second, and the
        crop length it was chosen on: the package's (``PATCHES_PER_SECOND`` on 10-s
        crops), or with ``preset="paper"`` the paper's (40 per 30-s crop)."""
        if self.preset == "paper":
            return PAPER.n_patches / PAPER.window_seconds, PAPER.window_seconds
        return PATCHES_PER_SECOND, DEFAULT_CROP_SECONDS

    def _check_n_patches(self):
        """``n_patches`` is None or an int PARS can pretrain with, refused before any
        work naming what is allowed."""
        value = self.n_patches
        low, why = 1, ""
        if self._pars():
            low = fewest_patches(self.pos_mask_ratio)  # checks pos_mask_ratio first
            why = f" (PARS needs 2 position-masked patches at pos_mask_ratio={self.pos_mask_ratio})"
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ValueError(
                "Invalid value for the 'n_patches' parameter. Allowed values are None "
                f"(scaled with the pretraining crop) or an int >= {low}{why}, but got "
                f"{value!r} instead."
            )

    def _crop(self, sfreq, patch, lengths):
        """Samples per pretraining crop, checked against the shortest windows of each
        source (``lengths``: name -> samples)."""
        window = self.pretrain_config().window_seconds
        n_crop = min(lengths["X"], int(round(DEFAULT_CROP_SECONDS * sfreq)))
        why = (
            f"{DEFAULT_CROP_SECONDS:g} s or the 'X' windows if shorter, as 'window_seconds' is None"
        )
        if window is not None:
            n_crop = int(round(window * sfreq))
            why = f"'window_seconds'={window}"
            if n_crop <= patch:
                raise ValueError(
                    f"{why} gives pretraining windows of {n_crop} samples, not longer than "
                    f"one patch ({patch} samples): every patch would start at 0, leaving no "
                    "position or shift to learn."
                )
        for name, n in lengths.items():
            if n_crop > n:
                raise ValueError(
                    f"'{name}' holds windows of {n} samples, shorter than the pretraining "
                    f"windows ({n_crop} samples: {why})."
                )
        return n_crop

    @staticmethod
    def _unlabeled_sources(X_unlabeled, sfreq):
        """The sources of ``X_unlabeled`` (one or a list), each as pretraining reads it:
        braindecode windows as their recordings (crops may cross window boundaries,
        overlapping windows are not duplicated), anything else as an array of windows."""
        from braindecode.datasets import BaseConcatDataset

        sources = []
        for source in _as_sources(X_unlabeled):
            if isinstance(source, BaseConcatDataset):
                rate = windows_sfreq(source, name="X_unlabeled")  # one rate, or refused
                if abs(rate - sfreq) > 1e-6:
                    raise ValueError(
                        f"'X_unlabeled' windows are sampled at {rate} Hz, 'X' at {sfreq} Hz."
                    )
                sources.append(source)
                continue
            if isinstance(source, np.ndarray) and not np.issubdtype(source.dtype, np.number):
                raise ValueError(
                    "'X_unlabeled' arrays must be numeric, of shape (n_windows, n_chans, "
                    f"n_times), but got shape {source.shape} and dtype {source.dtype}."
                )
            sources.append(read_windows(source, sfreq=sfreq, name="X_unlabeled").X)
        return sources

    @staticmethod
    def _source_length(source):
        """Samples per window of a source (an array, or braindecode windows)."""
        if isinstance(source, np.ndarray):
            return source.shape[-1]
        return int(np.shape(source[0][0])[-1])

    # -- fit -----------------------------------------------------------------------------
    @with_fit_threads
    def fit(self, X, y=None, groups=None, X_unlabeled=None):
        """Pretrain a new encoder on ``X`` (labels ignored) and ``X_unlabeled``.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
            Windows: an array (set ``sfreq``), braindecode windows, a ``Subset`` or
            ``SliceDataset`` of them, or ``mne.Epochs``.
        y : ignored
        groups : array-like, shape (n_windows,) | None
            The subject of each window: the pretext skill is then validated on whole
            subjects held out of pretraining.
        X_unlabeled : windows | ndarray | list of them | None
            More windows for pretraining, at least ``window_seconds`` long; braindecode
            windows are read as their recordings.

        Returns
        -------
        self : PARSPretrainer
        """
        config, initial = self.check_params()
        data = read_input(X, groups=groups, sfreq=self.sfreq)
        if initial is not None:
            check_encoder_rate(initial, data.sfreq, data.shape[1], name="init_encoder")
        n_chans, n_times = data.shape
        patch = check_window_length(n_times, n_chans, config.patch_seconds, data.sfreq)
        sources = None
        if self._pretrains():
            sources, lengths = [data.X], {"X": n_times}
            for unlabeled in self._unlabeled_sources(X_unlabeled, data.sfreq):
                sources.append(unlabeled)
                n = self._source_length(unlabeled)
                lengths["X_unlabeled"] = min(lengths.get("X_unlabeled", n), n)
            n_crop = self._crop(data.sfreq, patch, lengths)
            settings = self.pretrain_config(n_crop / data.sfreq)
            self._warn_patch_overlap(settings, n_crop, data.sfreq, config.patch_seconds)
        seed = fit_seed(self.random_state)
        with verbose_logging(self.verbose), isolated_random_state(seed, self.device):
            if sources is None:
                encoder = initial
                if encoder is None:
                    encoder = PatchEncoder(sfreq=data.sfreq, **config.encoder_kwargs())
                history, self.n_crop_, self.n_patches_ = None, None, None
            else:
                encoder, history = self._pretrain(config, settings, data, sources, n_crop, initial)
                self.n_crop_ = n_crop
                self.n_patches_ = settings.n_patches if self._pars() else None
        self.encoder_ = encoder.cpu().eval()
        self.history_ = history
        self.config_ = config
        self.sfreq_ = float(data.sfreq)
        return self

    def _warn_patch_overlap(self, settings, n_crop, sfreq, patch_seconds):
        """Warn when PARS's patches are drawn from crops shorter than those its default
        density was chosen on (at that density or more) or more densely than it, with
        the overlap statistics of a seeded draw at this crop and at the default's."""
        if not self._pars() or settings.sampling != "random":  # others never overlap
            return
        density, reference = self._patch_density()
        n, seconds = settings.n_patches, n_crop / sfreq
        as_dense = n >= settings.with_patches_for(seconds, density).n_patches
        short = n_crop < int(round(reference * sfreq))
        if not (n > density * seconds + 1e-9 or (short and as_dense)):
            return
        here = _draw_overlap(n_crop, sfreq, patch_seconds, n, settings.pos_mask_ratio)
        n_default = settings.with_patches_for(reference, density).n_patches
        default = _draw_overlap(
            int(round(reference * sfreq)), sfreq, patch_seconds, n_default,
            settings.pos_mask_ratio,
        )  # fmt: skip
        given = "given" if self.n_patches is not None else "n_patches=None"
        whose = "the paper's" if self.preset == "paper" else "the default"

        def pct(share):
            return f"{100 * share:.1f} %"

        warn_once(
            f"PARS draws {n} patches of {patch_seconds:g} s ({given}) from each "
            f"{seconds:g}-s pretraining crop, {n / seconds:.2f} per second ({whose} "
            f"density, {density:.2f} per second, was chosen on {reference:g}-s crops). In a "
            f"seeded draw at this crop ({here['n_draws']} draws, seed 0), "
            f"{pct(here['shared_pairs'])} of the pairs of position-masked patches share "
            f"samples and the patches of {pct(here['chained'])} of the crops chain end to "
            f"end by shared samples ({pct(default['shared_pairs'])} and "
            f"{pct(default['chained'])} with {whose} {n_default} patches in "
            f"{reference:g}-s crops): a shift can then be read by aligning samples instead "
            f"of learned from the EEG. Pretrain on crops of {reference:g} s or more "
            "(window_seconds; the windows of X must be as long: cut longer windows, or "
            "windows of continuous recordings, and give the fitted encoder_ to the "
            "classifier). Fewer patches (n_patches) chain less often, but the share of "
            "pairs that share samples is set by the crop's length, not by their number.",
            UserWarning,
            stacklevel=4,  # the caller of fit, past its thread decorator
        )

    def _pretrain(self, config, settings, data, sources, n_crop, initial=None):
        from braindecode_pars.pretraining import run_pretraining

        view = SingleChannelWindows(sources, n_times=n_crop)
        view.sfreq = data.sfreq
        if data.groups is not None:
            labelled = [f"group {g}" for g in np.asarray(data.groups)]
            rest = [f"window {r}" for r in view.index[len(labelled) :, 0]]
            view.split_groups = np.asarray(labelled + rest)
        epochs = settings.max_epochs_for(view)
        folder = None if self.checkpoint_dir is None else Path(self.checkpoint_dir) / "pretrain"
        try:
            net = run_pretraining(
                view,
                self.method,
                folder,
                encoder_kwargs=config.encoder_kwargs(),
                device=self.device,
                amp=self._on_cuda(self.amp),
                compile=self._on_cuda(self.compile),
                compile_mode=self.compile_mode,
                batches=self.batches,
                decoder_kernel=self.decoder_kernel,
                progress_bar=bool(self.verbose),
                init_encoder=initial,
                init_name=_encoder_name(self.init_encoder),
                stop_signals=self.stop_signals,
                callbacks=None if self.monitor is None else [("probe_monitor", self.monitor)],
                **settings.run_kwargs(epochs),
            )
        except TrainingStopped:
            raise  # its message says where the state is and how to continue
        except KeyboardInterrupt as err:
            keep = (
                f"its finished epochs are saved in '{folder}': fit again with the same "
                "checkpoint_dir to resume"
                if folder is not None
                else "set checkpoint_dir to keep finished epochs (a rerun then resumes)"
            )
            raise KeyboardInterrupt(f"Pretraining was interrupted; {keep}.") from err
        return net.encoder, net.history

    def transform(self, X):
        """Each window's per-channel features from the pretrained encoder.

        Returns
        -------
        features : ndarray, shape (n_windows, 2 * n_chans * emb_dim)
            For each channel in turn, the mean and the spread of its tokens over
            patches, the probe's default readout
            (:class:`~braindecode_pars.features.EncoderFeatures`).
        """
        from braindecode_pars.features.blocks import EncoderFeatures

        check_is_fitted(self, "encoder_")
        data = read_windows(X, sfreq=None if isinstance(X, Windows) else self.sfreq_)
        features = EncoderFeatures(self.encoder_, sfreq=self.sfreq_, device=self.device)
        return features.fit_transform(data.X)
