"""PARSFineTuner: the neural head, a thin braindecode ``EEGClassifier`` over a
:class:`~braindecode_pars.MultiChannelClassifier` built on a PatchEncoder.

Built as braindecode builds ``EEGClassifier`` on skorch: a few hooks (the module's
arguments, the class weights, the validation split, crops, augmentation, default
callbacks); ``fit`` reads the windows once and hands skorch a dataset of them, and
everything else (``partial_fit``, ``save_params``, ``classes``, ``callbacks``,
``history_``) is skorch's.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch
from braindecode import EEGClassifier

from braindecode_pars._util.bands import cut_at_nyquist
from braindecode_pars._util.logs import plural, verbose_logging
from braindecode_pars._util.optim import with_fused_default
from braindecode_pars._util.params import fill_doc
from braindecode_pars._util.seeding import fit_seed, isolated_random_state
from braindecode_pars._util.threads import with_fit_threads
from braindecode_pars.estimators._augmentation import augmented_loader, standard_augmentation
from braindecode_pars.estimators._class_weights import class_weights
from braindecode_pars.estimators._coded_windows import CodedWindows
from braindecode_pars.estimators._crops import FixedCrops, RandomCrops, crop_samples, crop_starts
from braindecode_pars.estimators._finetuner_params import (
    MODULE_SETTINGS,
    check_finetuner_params,
    check_module_settings,
)
from braindecode_pars.estimators._fit_callbacks import EpochTable, finetune_callbacks
from braindecode_pars.estimators._heads import DEFAULT
from braindecode_pars.estimators._inputs import (
    GroupsTransformerMixin,
    SeededWindowsMixin,
    WindowsClassifierMixin,
    check_encoder_rate,
    check_labels,
    check_window_length,
    load_encoder_param,
    say_resampling,
)
from braindecode_pars.estimators._learning_rates import encoder_param_groups
from braindecode_pars.estimators._spatial_init import csp_filters
from braindecode_pars.estimators._token_gate import choose_token_gate
from braindecode_pars.estimators._validation import group_split
from braindecode_pars.features.scaling import AlignSignals, check_align_groups
from braindecode_pars.io.estimator_inputs import at_rate, read_fitted, read_input
from braindecode_pars.io.windows import window_scale
from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.models.multichannel import MultiChannelClassifier
from braindecode_pars.models.spatial_front import check_bands
from braindecode_pars.pretraining.stopping import StopHandling
from braindecode_pars.weights import DEFAULT_ENCODER

logger = logging.getLogger(__name__)


class PARSFineTuner(
    StopHandling,
    SeededWindowsMixin,
    WindowsClassifierMixin,
    GroupsTransformerMixin,
    EEGClassifier,
):
    """Fine-tune a PatchEncoder with a spatial head on multi-channel windows.

    Each channel goes through the single-channel encoder; a cross-attention head
    pools the channels' tokens and classifies (the paper's fine-tuning model,
    :class:`~braindecode_pars.MultiChannelClassifier`). ``strategy="full"`` trains
    every weight (the paper's), ``"frozen"`` only the head (skorch's ``Freezer``),
    ``"lp-ft"`` the head for half of ``max_epochs`` and then every weight. It is the
    neural head of :class:`~braindecode_pars.PARSClassifier`
    (``head=PARSFineTuner(...)``, parameters ``head__<name>``), and a braindecode
    ``EEGClassifier``: ``callbacks``, ``history_``, ``partial_fit``, ``save_params``,
    ``classes``, ``device``, ``optimizer__*`` and ``module__*`` work as there.

    **The encoder it starts from.** By default (``encoder="default"``) the shipped PARS
    encoder ``"pars-small-v2"`` (:data:`~braindecode_pars.weights.DEFAULT_ENCODER`, 100
    Hz): ``PARSFineTuner()`` and ``PARSClassifier(head=PARSFineTuner())`` are the
    paper's fine-tuning of a pretrained encoder. As a
    :class:`~braindecode_pars.PARSClassifier` head, ``"default"`` gives way to the
    classifier's ``encoder`` when that is set
    (``PARSClassifier(encoder=PARSPretrainer(), head=PARSFineTuner())`` fine-tunes the
    encoder pretrained there; ``PARSClassifier(encoder=None, head=PARSFineTuner())``
    trains from scratch). ``encoder=None``: a new, randomly initialised small encoder
    at the windows' rate, every weight trained from scratch (the paper's supervised
    baseline). ``fit`` logs which encoder it starts from.

    **What to expect**: minutes per fit on a CPU; its scores beside the probe and the
    field's compact networks are on the benchmarks page (:doc:`/benchmarks`).

    **Which part carries the score.** At the defaults the model is two paths into one
    linear layer: the front end (CSP-initialised spatial filters, the band log-variance
    of the virtual channels they make) and the encoder's pooled token. Band power
    contrasts between channels (motor imagery's desynchronisation, lateralisation) are
    the front end's: on the motor-imagery and EEGMAT tasks measured the token added
    nothing held-out windows could show, ``token_gate="auto"`` left it out, and
    ``encoder=None`` and a pretrained encoder fitted the same model. What band power
    cannot see, such as the order of events within a window, is the encoder's: there
    held-out windows show the token's gain and it is kept. ``token_gate_`` says which
    path a fit kept; the rows are on the fine-tuning benchmark page
    (:doc:`/benchmarks/finetuning`).

    Parameters
    ----------
    module : type
        The model class, :class:`~braindecode_pars.MultiChannelClassifier` by default.
        ``fit`` builds it with its signal arguments (``n_outputs`` from the classes;
        ``n_chans``, ``n_times`` and ``sfreq`` from the windows, at the encoder's rate),
        ``encoder``, ``n_heads`` (the encoder's), and the fine-tuner's own model settings
        ``amplitude``, ``pooling``, ``spatial_filters`` (at most ``n_chans``),
        ``band_power``, ``token_gate``, ``readout``, ``patch_stride`` and
        ``spatial_drop_prob``. Its other arguments are skorch's ``module__<name>``
        (``module__n_heads``, ``module__channel_embedding``...). A setting given both
        ways (``spatial_filters=2, module__spatial_filters=3``), and ``module__`` of an
        argument ``fit`` sets, are refused by ``fit`` naming both (scikit-learn's
        ``InvalidParameterError``, a ``ValueError`` and a ``TypeError``).
    encoder : "default" | str | Path | PatchEncoder | None
        ``"default"``: ``"pars-small-v2"``, or a :class:`~braindecode_pars.PARSClassifier`'s
        own ``encoder`` when the fine-tuner is its head (see above). A shipped encoder's
        name, a saved encoder's path, an instance (copied at each fit), or None: a new,
        randomly initialised small encoder (``ENCODER_SIZES["small"]``), trained from
        scratch. A pretrained encoder reads windows at its own rate (100 Hz for the
        shipped ones): windows at another are resampled to it (MNE's resampling,
        :func:`~braindecode_pars.io.resample_windows`) at ``fit``, ``predict`` and
        ``transform``, as :class:`~braindecode_pars.PARSProbe` does for its encoder
        block, and ``fit`` logs both rates; ``encoder=None`` trains a new encoder at
        the windows' own rate.
    strategy : {"full", "frozen", "lp-ft"}
    lr_schedule : {"warmup-cosine", "constant"}
        ``"warmup-cosine"`` (the default): a linear warm-up from a tenth of ``lr`` over
        the first 10 % of each ``fit``'s steps, then a cosine to 0, each parameter group
        at its own share of ``lr``; ``"constant"``: ``lr`` throughout. A learning-rate
        scheduler of one's own in ``callbacks`` (skorch's ``LRScheduler``, the
        pretraining's ``WarmupCosineLR``) needs ``"constant"``: beside the fine-tuner's
        schedule both would set the rate at every batch, and ``fit`` refuses it.
    encoder_lr_scale : float
        The encoder's learning rate as a fraction of ``lr`` (its last block's, with
        ``layer_decay``).
    layer_decay : float in (0, 1]
        Layer-wise learning-rate decay: each encoder block below the last trains at
        ``layer_decay`` times the rate of the block above it, the tokenizer at
        ``layer_decay`` times the first block's; 1: one rate for the whole encoder.
    amplitude : False | True | "relative"
        Give the head what the encoder's instance normalisation (per channel and
        window) removes (:class:`~braindecode_pars.MultiChannelClassifier`'s
        ``amplitude``). False (the default; ``band_power`` gives the head the band
        power): none; ``"relative"``: each channel's broadband log amplitude relative
        to its window's channels, all channels mapped into the pooled token; ``True``:
        each channel's log amplitude added to its spatial token.
    pooling : {"mean", "mean+std"}
        How each channel's tokens are pooled over patches into its spatial token
        (:class:`~braindecode_pars.MultiChannelClassifier`'s ``pooling``).
    spatial_filters : int | None
        8 (the default): a spatial front end maps the channels to ``K = 8`` virtual
        channels (at most the windows' channels: ``min(K, n_chans)``) before the encoder
        (:class:`~braindecode_pars.MultiChannelClassifier`'s ``spatial_filters``), its
        filters set at each ``fit`` from the training windows by ``spatial_init``.
        None: the encoder reads the input channels (the paper's model).
    spatial_init : {"csp", "identity"}
        Where the spatial filters start: ``"csp"``, common spatial patterns of the
        training windows (after ``align``; in ``band_power``'s span when it is set), the
        class contrasts of band power that motor imagery rides on, computed by MNE's
        ``mne.decoding.CSP`` (each window's covariance shrunk by 0.1); ``"identity"``:
        the identity's first ``K`` rows. Computed inside ``fit`` from its own windows only,
        so safe inside cross-validation.
    band_power : None | (low, high) | sequence of (low, high)
        The log-variance of each (virtual) channel in these bands (default 8-30 Hz;
        ``0 <= low < high``, a band ending above the Nyquist frequency of the rate the
        model reads, the encoder's (the windows' with ``encoder=None``), cut there, one
        starting at or above it refused with ``ValueError``),
        standardised by statistics fixed from the training windows, read by the final
        layer beside the pooled token
        (:class:`~braindecode_pars.MultiChannelClassifier`'s ``band_power``); None: none.
    token_gate : {"auto", True, False, "closed"}
        Whether and how the encoder's pooled token reaches the final layer beside the
        band power. ``"auto"`` (the default): decided inside ``fit`` on held-out
        labelled windows. ``fit`` holds out about a third of its training windows
        (whole groups when ``groups`` name two or more; otherwise the last third of each
        class's windows in the order given, a block of time), fits the model on the
        rest twice, with the gate trainable (True) and with the token path removed
        (``"closed"``), and keeps the token only when the held-out windows show it
        helps: a higher balanced accuracy, and more windows right only with the token
        than only without it beyond chance (a one-sided sign test at 5 %); then it
        trains on all its windows with the choice (``token_gate_``; the scores are in
        ``token_gate_evidence_``, and the log says which). The two inner fits run with
        the same settings and seed, without ``callbacks`` (only the last fit gets
        them), a validation split or checkpoints. Without that evidence, or
        with a class of fewer than 2 windows, the path stays closed. It costs a fit on
        two thirds of the windows with the token, and one without, whose encoder is not
        run (a fraction of the cost). True: the token behind a learnable scalar gate
        that starts at 0 (how far it opens follows the number of optimiser steps, not
        what the token adds: on a few dozen motor-imagery windows it can open enough to
        memorise them). False: no gate (the paper's model).
        ``"closed"``: the token path removed, the front end alone (the spatial filters,
        the band log-variances and the final layer); the encoder is not run and not
        trained.
    readout : {"attention", "channels"}
        The spatial cross-attention (the paper's) or a channel-indexed linear readout.
    patch_stride : float | None
        Seconds between the encoder's patches: 0.5 (the default, as the probe reads
        them); None: the patch length, 1 s (the paper's).

        The defaults of the front end and of the recipe (``lr``, ``batch_size``,
        ``max_epochs``, ``lr_schedule``, ``augmentation``, ``amplitude``,
        ``spatial_drop_prob``, ``token_gate``) were chosen on motor-imagery selection
        splits and checked on EEGMAT's selection subjects; the numbers are on the
        fine-tuning benchmark page (:doc:`/benchmarks/finetuning`).
    spatial_drop_prob : float in [0, 1)
        Probability of dropping each spatial token in training: 0 (the default), none;
        the paper's 0.5 is ``spatial_drop_prob=0.5``.
    crop_seconds : float | None
        Train on random crops of this length and predict a window by the mean of
        ``n_eval_crops`` crops; None: whole windows.
    n_eval_crops : int
    align : {None, "groups"}
        None: windows as they are. "groups": Euclidean alignment, each group's windows
        whitened by its mean spatial covariance
        (:class:`~braindecode_pars.features.scaling.AlignSignals`; transductive, labels
        unused); groups from ``groups`` or braindecode windows'
        ``subject`` in ``fit`` and ``predict`` (None: the windows given, as one group).
    augmentation : "standard" | list of braindecode Transform | None
        Augmentations of the training batches (braindecode's ``AugmentedDataLoader``):
        None (the default): none; "standard" draws Fourier-phase surrogates, channel
        dropout (on windows of 5 channels or more) and a smooth time mask, each with
        probability 0.5
        (:func:`~braindecode_pars.estimators._augmentation.standard_augmentation`).
    valid_fraction : float
        Share of the groups held out to pick the best epoch (see ``min_valid_groups``).
    min_valid_groups : int | None
        None: no validation split, the last epoch is kept. An int: with at least this
        many groups (``fit``'s ``groups``, the ``subject`` of braindecode windows),
        about ``valid_fraction`` of them are held out and the epoch of lowest
        validation loss is kept. ``X_valid`` overrides both.
    valid_monitor : {"loss", "balanced_accuracy"}
        What picks the kept epoch on the validation set: the lowest class-weighted
        loss, or the highest balanced accuracy (the first epoch that reaches it).
    checkpoint_dir : str | Path | None
        Where the best epoch's parameters are written; None: kept in memory.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    random_state : int | None
        Seed of every draw of ``fit``; the global generators are left as they were.
    criterion, optimizer, lr, max_epochs, batch_size, callbacks, device, **kwargs
        skorch's: class-weighted cross-entropy, AdamW (weight decay 1e-4), lr 1e-3, batch
        4, 25 epochs (the paper fine-tuned its head at lr 3e-4, batch 16 and 200 epochs).
        ``callbacks`` holds no learning-rate scheduler unless ``lr_schedule="constant"``.
    verbose : int
        0 (the default): silent, as scikit-learn's estimators are (inside
        ``cross_val_score`` a table per fold would print hundreds of rows); 1: skorch's
        table of every epoch, and the package's messages of ``fit`` (which encoder it
        starts from, the time an epoch takes) on stderr unless logging is set up.

    Attributes
    ----------
    module_, history_, classes_
        skorch's.
    encoder_ : PatchEncoder
        The fine-tuned encoder (``module_.encoder``).
    validation_ : str
        How the kept epoch was chosen: "groups", "X_valid" or "none" (last epoch).
    token_gate_ : True | False | "closed"
        The token path of the fitted module: ``token_gate``, or ``"auto"``'s choice.
    token_gate_evidence_ : dict | None
        With ``token_gate="auto"``, what decided: ``open`` and ``closed``, the held-out
        balanced accuracies of the two inner fits; ``only_open`` and ``only_closed``,
        the held-out windows only that fit got right; ``p``, the sign test's p-value;
        ``n_held_out``; ``held_out``, ``"groups"`` or ``"time blocks"``. None
        otherwise, or when no window could be held out.
    n_crop_ : int
        Samples per training crop (``n_times_`` without crops).
    sfreq_, n_times_ : float, int
        The rate and length of the windows the module reads: the encoder's rate.
    input_sfreq_, input_n_times_ : float, int
        Those of the windows given (``predict`` takes windows like them).
    ch_names_ : list of str | None
        The channel names of fit, where the windows carried them (braindecode windows,
        ``mne.Epochs``; None for arrays): at ``predict``, ``predict_proba``,
        ``transform`` and ``score``, windows of these names in another order are
        reordered, other names are refused naming both lists.
    """

    # groups reach fit (the validation split, the alignment) and score under metadata
    # routing (PARSClassifier's, or cross_val_score's), as for PARSProbe
    __metadata_request__fit = {"groups": True}
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        module=MultiChannelClassifier,
        *,
        encoder=DEFAULT,
        strategy="full",
        lr_schedule="warmup-cosine",
        encoder_lr_scale=1.0,
        layer_decay=1.0,
        amplitude=False,
        pooling="mean",
        spatial_filters=8,
        spatial_init="csp",
        band_power=(8.0, 30.0),
        token_gate="auto",
        readout="attention",
        patch_stride=0.5,
        spatial_drop_prob=0.0,
        crop_seconds=None,
        n_eval_crops=5,
        align=None,
        augmentation=None,
        valid_fraction=0.2,
        min_valid_groups=None,
        valid_monitor="loss",
        checkpoint_dir=None,
        sfreq=None,
        random_state=None,
        criterion=torch.nn.CrossEntropyLoss,
        optimizer=torch.optim.AdamW,
        lr=1e-3,
        max_epochs=25,
        batch_size=4,
        callbacks=None,
        device="cpu",
        verbose=0,
        **kwargs,
    ):
        self.encoder = encoder
        self.strategy = strategy
        self.lr_schedule = lr_schedule
        self.encoder_lr_scale = encoder_lr_scale
        self.layer_decay = layer_decay
        self.amplitude = amplitude
        self.pooling = pooling
        self.spatial_filters = spatial_filters
        self.spatial_init = spatial_init
        self.band_power = band_power
        self.token_gate = token_gate
        self.readout = readout
        self.patch_stride = patch_stride
        self.spatial_drop_prob = spatial_drop_prob
        self.crop_seconds = crop_seconds
        self.n_eval_crops = n_eval_crops
        self.align = align
        self.augmentation = augmentation
        self.valid_fraction = valid_fraction
        self.min_valid_groups = min_valid_groups
        self.valid_monitor = valid_monitor
        self.checkpoint_dir = checkpoint_dir
        self.sfreq = sfreq
        self.random_state = random_state
        kwargs.setdefault("optimizer__weight_decay", 1e-4)  # paper section 2.5
        kwargs.setdefault("iterator_train__drop_last", False)
        kwargs.setdefault("train_split", None)  # the split is fit's (see min_valid_groups)
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            callbacks=callbacks,
            device=device,
            verbose=verbose,
            **kwargs,
        )

    def __setattr__(self, name, attr):
        # ``encoder`` is a parameter (copied into the module at each fit), not a module
        # of the net: skorch's rule against setting modules outside initialize does not
        # apply, so set_params(encoder=<PatchEncoder>) and grid searches over encoders work
        if name == "encoder":
            return object.__setattr__(self, name, attr)
        super().__setattr__(name, attr)

    # -- checks --------------------------------------------------------------------------
    def check_params(self):
        """Check the parameters without data (``fit`` and ``PARSClassifier`` call it
        first), nested names too, by skorch's own check (skorch runs it in initialize)."""
        check_finetuner_params(self)

    # -- fit -----------------------------------------------------------------------------
    @fill_doc
    @with_fit_threads
    def fit(self, X, y=None, groups=None, X_valid=None, y_valid=None, **fit_params):
        """Read the windows once and train.

        Parameters
        ----------
        %(X_y_fit)s
        groups : array-like, shape (n_windows,) | None
            The subject of each window, for the validation rule (``min_valid_groups``).
        X_valid, y_valid : like ``X`` and ``y`` | None
            A fixed validation set for choosing the best epoch.
        **fit_params
            skorch's (passed to the module's forward).

        Returns
        -------
        self : PARSFineTuner
        """
        with verbose_logging(self.verbose):
            return self._fit(X, y, groups, X_valid, y_valid, **fit_params)

    def _fit(self, X, y, groups, X_valid, y_valid, **fit_params):
        """``fit``'s work, its messages shown by ``verbose``."""
        self.check_params()
        given = load_encoder_param(self._encoder_value())  # a bad file refused before reading
        data = read_input(X, y, groups, sfreq=self.sfreq)
        classes = check_labels(data.y)
        n_chans, n_times = data.shape
        patch_seconds = 1.0 if given is None else given.patch_seconds
        check_window_length(n_times, n_chans, patch_seconds, data.sfreq)
        input_sfreq, input_n_times = data.sfreq, n_times
        if given is not None:  # a pretrained encoder reads windows at its own rate
            if abs(given.sfreq - data.sfreq) > 1e-6 * given.sfreq:
                say_resampling(type(self).__name__, data.sfreq, given.sfreq)
            data = at_rate(data, given.sfreq)
            n_times = data.shape[1]
            check_encoder_rate(given, data.sfreq, n_times)
        patch = check_window_length(n_times, n_chans, patch_seconds, data.sfreq)
        self.classes_inferred_ = classes
        codes = self._codes(data.y)
        check_align_groups(self.align, data)
        valid = None
        if X_valid is not None:
            valid = read_input(X_valid, y_valid, sfreq=input_sfreq, name="X_valid")
            valid = at_rate(valid, data.sfreq)
            check_labels(valid.y, "y_valid", at_least=1)
            if valid.shape != data.shape:
                raise ValueError(
                    f"'X_valid' windows {valid.shape} differ from those of 'X' {data.shape}."
                )
            valid_codes = self._codes(valid.y, "y_valid")
        self.seed_ = fit_seed(self.random_state)
        self.sfreq_ = float(data.sfreq)
        bands = check_bands("band_power", self.band_power) or []
        cut_at_nyquist("band_power", bands, self.sfreq_, rate="model's rate")  # before work
        self.n_chans_, self.n_times_ = n_chans, n_times
        self.ch_names_ = data.ch_names
        self.input_sfreq_, self.input_n_times_ = float(input_sfreq), input_n_times
        self.scale_ = window_scale(data.X)
        self.aligner_ = self.align and AlignSignals()
        X = self.aligner_.fit_transform(data.X, groups=data.groups) if self.aligner_ else data.X
        self.n_crop_ = crop_samples(self.crop_seconds, self.sfreq_, n_times, patch, patch_seconds)
        if valid is not None:
            train = CodedWindows(X, codes)
            held_out = CodedWindows(self._aligned(valid), valid_codes)
            self.validation_ = "X_valid"
        else:
            train_idx, valid_idx, self.validation_ = group_split(
                codes, data.groups, self.min_valid_groups, self.valid_fraction, self.seed_
            )
            train = CodedWindows(X, codes, train_idx)
            held_out = None if valid_idx is None else CodedWindows(X, codes, valid_idx)
        self.class_weight_ = class_weights(train.targets(), len(self.classes_))
        if held_out is not None and self.n_crop_ < n_times:
            held_out = FixedCrops(held_out, self.n_crop_, self._eval_starts())
        self.token_gate_, self.token_gate_evidence_ = self.token_gate, None
        if self.token_gate == "auto":  # decided on held-out training windows
            idx = train.indices
            part = None if data.groups is None else np.asarray(data.groups)[idx]
            self.token_gate_, self.token_gate_evidence_ = choose_token_gate(
                self, data.X[idx], np.asarray(data.y)[idx], part, codes[idx], given
            )
        # what the hooks read during this fit (skorch refuses modules, such as
        # braindecode's transforms, as attributes set outside its initialize methods)
        self._fit_state = dict(
            valid=held_out, transforms=self._augmentation(), encoder=given,
            front_end=(X, codes, train.indices),
        )  # fmt: skip
        logger.info(
            "Fine-tuning (strategy=%r) %s on %s of %s x %g s for %s on %s; validation: %s.",
            self.strategy, self._starts_from(given), plural(len(train), "window"),
            plural(n_chans, "channel"), self.n_crop_ / self.sfreq_,
            plural(self.max_epochs, "epoch"), self.device, self.validation_,
        )  # fmt: skip
        try:
            with isolated_random_state(self.seed_, self.device):
                super().fit(self._crops(train), y=None, **fit_params)
        finally:
            self._fit_state.update(valid=None, encoder=None, front_end=None)
        return self

    def _aligned(self, data):
        """``data``'s windows aligned within their groups (``align``), else as they are."""
        aligner = getattr(self, "aligner_", None)
        return data.X if aligner is None else aligner.transform(data.X, groups=data.groups)

    def _codes(self, y, name="y"):
        """Labels as indices into ``classes_`` (the user's ``classes`` order if given)."""
        unknown = sorted(set(np.unique(y).tolist()) - set(np.asarray(self.classes_).tolist()))
        if unknown:
            source = "'classes'" if self.classes is not None else "'y'"
            raise ValueError(f"'{name}' holds classes {unknown} that {source} does not.")
        index = {label: i for i, label in enumerate(np.asarray(self.classes_).tolist())}
        return np.asarray([index[v] for v in np.asarray(y).tolist()], dtype=np.int64)

    def _crops(self, dataset):
        return RandomCrops(dataset, self.n_crop_) if self.n_crop_ < self.n_times_ else dataset

    def _eval_starts(self):
        return crop_starts(self.n_times_, self.n_crop_, self.n_eval_crops)

    def _augmentation(self):
        if self.augmentation == "standard":
            return standard_augmentation(
                self.sfreq_, random_state=self.seed_, n_chans=self.n_chans_
            )
        return list(self.augmentation or [])

    def _takes_default(self):
        """Whether ``encoder`` is ``"default"``: the shipped :data:`DEFAULT_ENCODER`."""
        return isinstance(self.encoder, str) and self.encoder == DEFAULT

    def _encoder_value(self):
        """What ``encoder`` names, ``"default"`` read as :data:`DEFAULT_ENCODER`."""
        return DEFAULT_ENCODER if self._takes_default() else self.encoder

    def _starts_from(self, given):
        """Which encoder this fit starts from, in words, for the log."""
        if given is None:
            return (
                "from a new, randomly initialised encoder (encoder=None: the small size, "
                "every weight trained from scratch)"
            )
        if self._takes_default():
            return f"from the shipped encoder {DEFAULT_ENCODER!r} (encoder='default')"
        if isinstance(self.encoder, str | os.PathLike):
            return f"from the encoder {str(self.encoder)!r}"
        # an instance: given by the user, or set by PARSClassifier (whose own line says
        # which encoder it is: a shipped one, a pretrained one)
        return (
            f"from the PatchEncoder of its 'encoder' parameter ({given.emb_dim} features x "
            f"{given.depth} blocks, {sum(p.numel() for p in given.parameters()):,} parameters)"
        )

    def _initial_encoder(self):
        """The encoder a new module starts from: ``encoder`` (the copy ``fit`` loaded, used
        by this fit's module only; else loaded now), or a new small one."""
        given = (getattr(self, "_fit_state", None) or {}).get("encoder")
        given = load_encoder_param(self._encoder_value()) if given is None else given
        if given is not None:
            return given
        return PatchEncoder(sfreq=self.sfreq_, **ENCODER_SIZES["small"])

    # -- skorch hooks --------------------------------------------------------------------
    def _set_signal_args(self, X, y, classes):
        """No inference: the module's signal arguments come from ``fit``."""

    def check_data(self, X, y):
        """No check here: :meth:`get_dataset` reads and checks the windows."""

    def get_dataset(self, X, y=None):
        """A dataset of coded windows: what ``fit`` built, or ``X`` read and coded
        (``partial_fit`` on new windows; labels read from windows when ``y`` is None)."""
        if isinstance(X, torch.utils.data.Dataset) and not hasattr(X, "datasets"):
            if isinstance(X, CodedWindows | RandomCrops | FixedCrops):
                return X
        data = read_fitted(self, X, y)
        check_labels(data.y, at_least=1)
        return self._crops(CodedWindows(self._aligned(data), self._codes(data.y)))

    def get_split_datasets(self, X, y=None, **fit_params):
        """The training set and the validation set ``fit`` built (None: no split)."""
        state = getattr(self, "_fit_state", None) or {}
        return self.get_dataset(X, y), state.get("valid")

    def get_params_for(self, prefix):
        """skorch's, plus what ``fit`` resolved: the module's signal arguments and
        encoder, the fine-tuner's model settings (``_finetuner_params.MODULE_SETTINGS``,
        refused as ``module__`` too), the class weights, the
        encoder's learning rate; AdamW runs fused on a CPU or CUDA unless told
        otherwise."""
        params = super().get_params_for(prefix)
        if prefix == "module" and hasattr(self, "n_crop_"):
            check_module_settings(self)  # none of them given twice (set_params after fit)
            encoder = self._initial_encoder()
            resolved = {name: getattr(self, name) for name in MODULE_SETTINGS}
            resolved["token_gate"] = getattr(self, "token_gate_", self.token_gate)
            if self.spatial_filters is not None:
                resolved["spatial_filters"] = min(self.spatial_filters, self.n_chans_)
            resolved.update(
                n_outputs=len(self.classes_),
                n_chans=self.n_chans_,
                n_times=self.n_crop_,
                sfreq=self.sfreq_,
                encoder=encoder,
                n_heads=encoder.n_heads,  # module__n_heads sets the spatial attention's
            )
            params = {**resolved, **params}
        if prefix == "criterion" and hasattr(self, "class_weight_"):
            params.setdefault("weight", self.class_weight_)
        if prefix == "optimizer":
            groups = list(params.get("param_groups", []))
            if not any(pattern.startswith("encoder") for pattern, _ in groups):
                module = getattr(self, "module_", None)
                depth = len(module.encoder.blocks) if isinstance(module, torch.nn.Module) else 0
                groups += encoder_param_groups(
                    self.lr, self.encoder_lr_scale, self.layer_decay, depth
                )
            if groups:
                params["param_groups"] = groups
            params = with_fused_default(self.optimizer, params, self.device)
        return params

    def initialize_module(self):
        if not hasattr(self, "n_crop_"):
            raise RuntimeError(
                "PARSFineTuner builds its module in fit (its signal arguments come from the "
                "windows); call fit, not initialize."
            )
        super().initialize_module()
        front_end = (getattr(self, "_fit_state", None) or {}).get("front_end")
        if front_end is not None:
            self._init_front_end(self.module_, *front_end)
        return self

    def _init_front_end(self, module, X, codes, indices):
        """Set the spatial filters (``spatial_init``) and fix the band-power statistics
        from the training windows of this fit (``X[indices]``, aligned), on the crops
        the module reads (the evaluation crops when training on random ones)."""
        if module.spatial_filter is None and module.band_log_variance is None:
            return
        X, codes = X[indices], codes[indices]
        if module.spatial_filter is not None and self.spatial_init == "csp":
            bands = module.band_power
            span = None if bands is None else (min(b[0] for b in bands), max(b[1] for b in bands))
            module.spatial_filter.set_filters(
                csp_filters(X, codes, module.spatial_filters, self.sfreq_, span)
            )
            logger.info(
                "Spatial filters: %d common spatial patterns of the %s%s.",
                module.spatial_filters, plural(len(X), "training window"),
                "" if span is None else f" in {span[0]:g}-{span[1]:g} Hz",
            )  # fmt: skip
        if module.band_log_variance is not None:
            if self.n_crop_ < self.n_times_:
                X = np.concatenate([X[..., s : s + self.n_crop_] for s in self._eval_starts()])
            module.band_log_variance.set_statistics(X, transform=module.virtual_channels)

    @property
    def _default_callbacks(self):
        """skorch's epoch timer, losses and table (:class:`EpochTable`: in colour on a
        terminal only); the time estimate after the first epoch; the validation
        balanced accuracy and best epoch when a validation set exists; the freezing of
        the encoder."""
        callbacks = [
            (name, EpochTable() if name == "print_log" else cb)  # colour on a terminal only
            for name, cb in super()._default_callbacks
            if name != "valid_acc"
        ]
        validation = getattr(self, "validation_", "none") != "none"
        return callbacks + finetune_callbacks(
            self.strategy, self.max_epochs, validation, self.valid_monitor, self.checkpoint_dir,
            self.lr_schedule,
        )  # fmt: skip

    def get_iterator(self, dataset, training=False, drop_index=True):
        """Training batches through braindecode's ``AugmentedDataLoader`` when
        ``augmentation`` is set (with DataLoader workers, each worker's transforms
        reseeded from torch's seed of that worker: ``_augmentation.augmented_loader``)."""
        transforms = (getattr(self, "_fit_state", None) or {}).get("transforms")
        if training and transforms:
            kwargs = self.get_params_for("iterator_train")
            kwargs.setdefault("batch_size", self.batch_size)
            return augmented_loader(dataset, transforms, **kwargs)  # reseeded per worker
        return super().get_iterator(dataset, training=training, drop_index=drop_index)

    # -- prediction ----------------------------------------------------------------------
    def _read(self, X, y=None, groups=None):
        self.check_is_fitted()  # skorch's NotFittedError
        return read_fitted(self, X, y, groups)

    def _coded(self, data):
        """Read windows as the net reads them, aligned within their groups; with crops,
        ``n_eval_crops`` crops of each (``FixedCrops.average`` takes their mean)."""
        windows = CodedWindows(self._aligned(data), np.zeros(len(data), dtype=np.int64))
        if self.n_crop_ == self.n_times_:
            return windows
        return FixedCrops(windows, self.n_crop_, self._eval_starts())

    def _proba(self, data):
        dataset = self._coded(data)
        proba = EEGClassifier.predict_proba(self, dataset)
        return dataset.average(proba) if isinstance(dataset, FixedCrops) else proba

    def transform(self, X, groups=None):
        """Each window's features, what the module's ``final_layer`` reads.

        Parameters
        ----------
        X : array-like, shape (n_windows, n_chans, n_times) | braindecode windows
            Windows like those of ``fit`` (``input_sfreq_``, ``input_n_times_``).
        groups : array-like, shape (n_windows,) | None
            The group of each window, for ``align="groups"``.

        Returns
        -------
        features : ndarray, shape (n_windows, emb_dim + n_virtual * n_bands)
            The module's ``return_features``
            (:attr:`MultiChannelClassifier.n_features
            <braindecode_pars.MultiChannelClassifier.n_features>` columns): the pooled token
            (``emb_dim`` columns; times the gate where there is one,
            ``token_gate_=True``; zeros where the token path is removed,
            ``token_gate_="closed"``), then, with
            ``band_power``, the standardised band log-variance of each of the
            ``n_virtual`` channels the encoder reads (``min(spatial_filters, n_chans)``;
            ``n_chans`` with ``spatial_filters=None``) in each of the ``n_bands`` bands,
            band by band. At the defaults (one band, 8 virtual channels) that is
            ``emb_dim + min(8, n_chans)`` columns. The mean over the ``n_eval_crops``
            crops of a window when fitted on crops.
        """
        dataset = self._coded(self._read(X, groups=groups))
        self.module_.eval()
        features = []
        with torch.no_grad():
            for Xi, _ in self.get_iterator(dataset, training=False):
                Xi = Xi.to(self.device)
                out = self.infer(Xi, return_features=True)  # braindecode's dict
                features.append(out["features"].cpu().numpy())
        features = np.concatenate(features)
        return dataset.average(features) if isinstance(dataset, FixedCrops) else features

    @property
    def encoder_(self):
        """The fine-tuned :class:`PatchEncoder` (``module_.encoder``)."""
        self.check_is_fitted()
        return self.module_.encoder
