"""PARSClassifier: pretrain a single-channel encoder, then fine-tune it, in one ``fit``.

Built as braindecode builds ``EEGClassifier`` on skorch's ``NeuralNetClassifier``:
a subclass that overrides a few hooks (the module's arguments, the class weights,
the validation split, crops, default callbacks) and leaves training to skorch.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np
import torch
from braindecode import EEGClassifier
from braindecode.augmentation import AugmentedDataLoader
from sklearn.base import TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score
from skorch.callbacks import EpochScoring, Freezer, ProgressBar, Unfreezer

from ._logging import verbose_logging
from .datasets.single_channel import SingleChannelWindows
from .estimator_settings import FINETUNE_STRATEGIES, EstimatorSettings  # noqa: F401
from .floor import bands_below_nyquist
from .models import pretext_params
from .models.classifier import MultiChannelClassifier
from .models.encoder import PatchEncoder
from .probe import AlignedProbe, probe_pipeline
from .training.finetune import (
    CodedWindows,
    FixedCrops,
    RandomCrops,
    _valid_balanced_accuracy,
    best_epoch,
    class_weights,
    crop_starts,
    standard_augmentation,
)
from .training.interrupt import PropagateInterrupt
from .training.optim import with_fused_default
from .training.pretrain import training_windows
from .training.run import pretrain
from .training.schedule import epochs_for_steps
from .training.seeding import fit_seed, isolated_random_state

logger = logging.getLogger(__name__)


class PARSClassifier(PropagateInterrupt, EstimatorSettings, TransformerMixin, EEGClassifier):
    """Self-supervised pretraining, then multi-channel fine-tuning, as one classifier.

    ``fit`` pretrains a :class:`~braindecode_pars.PatchEncoder` with PARS (or, with
    ``pretrain``, one of the baselines: MAE, MP3, DropPos) on the training windows
    (one random channel of a random crop per example, plus any ``X_unlabeled``),
    then fine-tunes a :class:`~braindecode_pars.MultiChannelClassifier` built on it.
    A saved encoder (``pretrained_encoder``, e.g. the shipped ``"pars-small"``)
    skips pretraining; ``pretrain_epochs=0`` without one trains from scratch, the
    paper's supervised baseline.

    It is braindecode's ``EEGClassifier`` (a skorch ``NeuralNetClassifier``) with
    a few hooks overridden, so everything skorch offers works as there:
    ``callbacks`` (``EarlyStopping``, loggers), ``history_``, ``module_``,
    ``save_params`` / ``load_params``, pickling, ``device``, ``optimizer__*`` and
    ``module__*`` parameters, ``clone``, ``set_params`` and grid search over every
    parameter below (``save_params`` and ``partial_fit`` are for the neural head:
    a classifier fitted with the probe is pickled whole). ``transform`` gives each
    window's features, so the classifier also works as a feature extractor in a
    scikit-learn ``Pipeline``.

    **What to expect.** With a pretrained encoder the default is a probe: a
    logistic regression over the frozen encoder's features beside log band power
    and the Riemannian tangent space (see Notes for how it was chosen and what it
    scores). With one labelled subject or block, on the five development tasks, it
    scores 2.4 points under the better classical floor of each task on their
    selection splits and 1.9 under it on their test splits, and the encoder block
    does not carry its weight there: over three pretraining seeds the same probe
    without the encoder scores as well or better. Compare with
    ``probe_pipeline(None, tangent_space=True, C=10)``
    (:func:`~braindecode_pars.probe.probe_pipeline`),
    :func:`~braindecode_pars.floor.band_power_pipeline` and
    :func:`~braindecode_pars.floor.riemann_pipeline` on your data.

    ``X`` is read once per ``fit`` and once per ``predict``, through
    :func:`~braindecode_pars.datasets.adapters.read_windows`: an array
    (n_windows, n_chans, n_times), braindecode windows (they carry their labels,
    sampling rate and subjects), a ``torch.utils.data.Subset`` or skorch
    ``SliceDataset`` of windows, the lists of window items ``(x, y, inds)`` that
    scikit-learn makes of windows when it splits them (set ``sfreq``), or
    ``mne.Epochs``.

    Parameters
    ----------
    module : type
        The fine-tuning model class; its signal arguments, ``encoder``,
        ``spatial_drop_prob``, ``amplitude`` and ``n_heads`` are set by ``fit``;
        others can be given as ``module__<name>``.
    pretrain : {"pars", "mae", "mp3", "droppos"}
        The pretext task. All share the encoder, the pretraining net and its settings.
    pretrained_encoder : str | Path | PatchEncoder | None
        The name of an encoder shipped with the package (``"pars-small"``), a folder
        written by ``encoder.save_pretrained`` (braindecode's Hugging Face layout), a
        file written by :func:`~braindecode_pars.save_encoder`, or an instance (it is
        copied). Its sampling rate and patch length must match the data's. Its size
        is its own: ``encoder`` must then be None.
    encoder : "small" | "paper" | dict | None
        The size of a new encoder (:data:`~braindecode_pars.models.ENCODER_SIZES`):
        None (default) or "small": 64 features, 4 blocks of 4 heads, feed-forward
        128, the shipped encoder's size, which pretrains on a CPU; "paper": the
        paper's 512 x 8 blocks (12.7 M parameters, for a GPU); or a dict of
        ``emb_dim``, ``depth``, ``n_heads``, ``ff_dim``, ``drop_prob``.
    patch_seconds : float
        Patch length (paper: 1 s).
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
        (``pretrain_history_``'s ``valid_skill``): whole groups (subjects) when
        ``fit`` has groups, each unlabelled window on its own, if whole groups can
        make about that share (at most twice it); windows otherwise (a warning says
        so when groups were given).
    pretrain_preset : {None, "paper"}
        ``"paper"``: the paper's lr 1e-4, batch 512, 1000 epochs and 30-s crops,
        for a corpus of its size (on a few hundred windows they stay at the loss of
        predicting no shift: ``benchmarks/results/pretext_settings.md``).
    finetune : {"auto", "probe", "full", "frozen", "lp-ft"}
        "probe": no neural training; a class-balanced logistic regression (inverse
        penalty ``probe_C``) over the frozen encoder's per-channel features, log band
        power and the Riemannian tangent space of the channels' covariances, each
        block scaled to the same total variance
        (:func:`~braindecode_pars.probe.probe_pipeline`; whole windows, seconds on a
        CPU; the fitted pipeline is ``probe_``). "full" (the paper's): every weight
        of the encoder and the spatial head is trained; "frozen": the encoder is
        fixed (skorch's ``Freezer``) and only the spatial head trains; "lp-ft": the
        frozen head for half of ``max_epochs``, then every weight (``Unfreezer``),
        the encoder at ``lr * encoder_lr_scale``. "auto" (default): "probe" when the
        encoder is pretrained (given, or pretrained by ``fit``), "full" from
        scratch; the strategy used is ``finetune_``. How it was chosen: Notes.
    probe_C : float
        Inverse L2 strength of the probe's logistic regression.
    probe_align : {None, "groups"}
        None (default): the probe sees each window's features as they are
        (:func:`~braindecode_pars.probe.probe_pipeline`). "groups": the probe aligns
        each subject (or block) on its own windows first: each feature standardised
        within the group, the channel covariances re-centred on the group's
        Riemannian mean (:class:`~braindecode_pars.probe.AlignedProbe`). The groups
        are ``fit``'s ``groups`` (the ``subject`` of braindecode windows), and those
        of ``predict``, ``predict_proba``, ``transform`` and ``score``: their
        ``groups``, the windows' subjects, or else all the windows of the call as one
        group (one held-out subject at a time, as in a leave-one-subject-out fold).
        A group of fewer than :data:`~braindecode_pars.probe.ALIGN_MIN_WINDOWS`
        windows (a few windows predicted on their own) is aligned on statistics
        shrunk toward the training groups' (``fit`` needs one group that large).
        Each group should hold both conditions: on a task whose label is the
        subject's own (patient vs control) it removes the signal. A scorer given by name
        (``scoring="balanced_accuracy"``) calls ``predict`` without groups, so an
        array fold of several subjects is aligned as one group: pass braindecode
        windows, whose subjects are read, or hold out one subject per fold. Only
        with the probe (``finetune="probe"``, or "auto" with a pretrained encoder).
        The strongest option the selection splits found, and not the default for
        the reasons of design given in Notes.
    encoder_lr_scale : float
        The encoder's learning rate as a fraction of ``lr`` (an optimizer parameter
        group).
    amplitude : bool
        Give the spatial head each channel's log amplitude, which the encoder's
        instance normalisation removes (see :class:`MultiChannelClassifier`).
    spatial_drop_prob : float
        Spatial-token dropout of the fine-tuning model. Paper: 0.5.
    crop_seconds : float | None
        Fine-tune the neural head on random crops of this length (a new crop of
        every window each epoch) and predict a window by averaging the class
        probabilities of ``n_eval_crops`` crops spread over it; the crop used is
        ``n_crop_`` samples. None (default): whole windows, as the paper (a 30-s
        sleep epoch whose label depends on all of it is never cut). Not with the
        probe, which reads whole windows.
    n_eval_crops : int
        Crops per window at validation and prediction when crops are used.
    augmentation : "standard" | list of braindecode Transform | None
        Augmentations of the training batches (braindecode's
        ``AugmentedDataLoader``): ``"standard"``
        (:func:`~braindecode_pars.training.finetune.standard_augmentation`), a list
        of transforms, or None. Their draws are seeded by ``random_state``.
    valid_fraction : float
        Share of the groups held out to pick the best epoch (see ``min_valid_groups``).
    min_valid_groups : int | None
        The one validation rule of the neural strategies, whatever the input. None
        (default): no validation split; the last of ``max_epochs`` epochs is kept
        (how this was chosen: Notes). An int: when the windows come with groups
        (``fit(..., groups=)``, the ``subject`` column of braindecode windows, or
        ``groups`` routed by scikit-learn's metadata routing) from at least this
        many groups, about ``valid_fraction`` of the groups are held out and the
        epoch of lowest validation loss is kept, as the paper does with its
        validation subjects; with fewer groups, or none, the last epoch is kept.
        ``validation_`` says which happened. ``X_valid`` overrides both.
    checkpoint_dir : str | Path | None
        Where to keep state on disk: pretraining writes its resumable state to
        ``<checkpoint_dir>/pretrain`` (a rerun resumes it) and fine-tuning the best
        epoch's parameters to ``<checkpoint_dir>/finetune``. None (default): ``fit``
        writes no file; the best epoch is kept in memory.
    sfreq : float | None
        Sampling rate of array input and of window items split by scikit-learn;
        read from braindecode windows and ``mne.Epochs`` otherwise.
    random_state : int | None
        Seed of every random draw of ``fit`` (initialisation, pretraining crops,
        channels, patches and masks, batch order, crops, spatial dropout,
        augmentation, the validation split): on a CPU the same seed gives the same
        predictions. None: a fresh seed from the operating system. Either way
        ``fit`` leaves torch's and numpy's global generators as it found them.
    criterion, optimizer, lr, max_epochs, batch_size, callbacks, device, verbose, **kwargs
        skorch's: class-weighted cross-entropy (``compute_class_weight("balanced")``),
        AdamW with ``optimizer__weight_decay=1e-4`` (pretraining's too), lr 3e-4, 40
        epochs, batch 16 (the neural strategies' settings; how they were chosen:
        Notes); ``callbacks`` add to the defaults; ``verbose=1``: progress
        bars and the epoch table; any other skorch parameter (``iterator_train__*``...).

    Attributes
    ----------
    classes_ : ndarray
        The labels seen in ``fit``.
    finetune_ : str
        The fine-tuning strategy used ("auto" resolved).
    probe_ : AlignedProbe | LabelledPipeline
        With the probe: the fitted :class:`~braindecode_pars.probe.AlignedProbe`, or
        with ``probe_align=None`` :func:`~braindecode_pars.probe.probe_pipeline` (its
        encoder is a copy of ``encoder_``).
    validation_ : str
        How the kept epoch was chosen: "groups" (best epoch on held-out groups),
        "X_valid" (best epoch on the given validation set) or "none" (last epoch).
    n_crop_ : int
        Samples per fine-tuning crop (``n_times_`` without crops).
    encoder_ : PatchEncoder
        The fine-tuned encoder.
    module_ : MultiChannelClassifier
        The fine-tuned model.
    history_ : skorch History
        The fine-tuning history.
    pretrain_history_ : skorch History | None
        The pretraining history, if pretraining ran.

    Notes
    -----
    **How the defaults were chosen.** On the selection splits of the first four
    development tasks (:mod:`braindecode_pars.experiments.dev_tasks`: EEGMAT rest vs
    arithmetic across subjects; PhysioNet-MI S001 imagined and executed left vs
    right and 4-class imagery across blocks of runs), with an encoder pretrained on
    none of the subjects or blocks they score (``benchmarks/encoders/pars-selection``),
    one labelled subject or block, balanced accuracy averaged over the distinct
    labelled sets of 5 draws (each set once; two on each MI task) and then over the
    tasks (``benchmarks/results/dev_tasks_selection.md``): the probe at
    ``probe_C=100`` 0.579 (the best of 20 probe rows: blocks, C = 1, 10, 100 and an
    inner leave-one-group-out choice of C among 0.1, 1, 10 and 100, which with one
    labelled unit has nothing to split and falls back to C = 1, and with two to four
    units, on EEGMAT only since each MI selection part labels one block, did not beat
    a fixed C); the trained spatial head
    over the frozen encoder on half-window crops of windows of 10 s or more (the
    defaults before) 0.469; full training from scratch 0.446; the better floor per
    task 0.573. On the test splits, scored once after the choice, with the shipped
    ``pars-small`` (``dev_tasks_test.md``): the probe 0.541, the defaults before
    0.453, scratch 0.458, the floor chosen per task on selection 0.566; the same
    probe over a randomly initialised encoder 0.575 (one initialisation; over five,
    measured since, 0.546 ± 0.037) and without an encoder 0.570,
    so on the test splits ``pars-small`` does not add to the classical blocks.
    A fifth task, added since (PhysioNet-MI S001 executed both fists vs both feet),
    leaves the probe the best of the 20 probe rows on selection (the mean of the
    five: the probe 0.615, the defaults before 0.481, scratch 0.436, the better floor
    per task 0.639) and on its test split, scored once, the probe 0.772 against 0.768
    for its floor chosen on selection (the mean of the five: the probe 0.587, the
    floor chosen per task 0.606, the probe over a random encoder 0.602 ± 0.024 over
    five initialisations; on selection 0.554 ± 0.040).
    Two more selection encoders (the same corpus and settings, pretraining seeds 1
    and 2) give the probe 0.550 and 0.590 on the selection splits against seed 0's
    0.615: 0.585 ± 0.033 over the three, under the same probe without the encoder
    (0.603 at C = 10; ``dev_tasks_selection_seeds.md``), so the selection splits no
    longer support the encoder block (a rule written before the third encoder's rows
    were seen). The encoder block stays in the default, since with
    ``pretrained_encoder`` set the estimator's job is to use that encoder; on a new
    task, compare with the encoder-free probe,
    ``probe_pipeline(None, sfreq=..., tangent_space=True, C=10)``.
    Whole windows (``crop_seconds=None``) are the default of the neural strategies.
    Their settings (``lr``, ``max_epochs``, ``batch_size``, ``amplitude``) were
    measured on the same selection splits at one labelled unit, one at a time around
    lr 1e-3, 40 epochs, batch 16 and no amplitude path (values read earlier off
    EEGMAT's test subjects), and chosen by the mean of two rows, the frozen head over
    the selection encoder and full training from scratch (``dev_tasks_selection.md``,
    the rows ``deep ...[setting]``): lr 3e-4 0.481 (frozen 0.516, scratch 0.446), lr
    3e-3 0.478, lr 1e-3 0.459; 20 and 80 epochs 0.467 and 0.464 (at lr 3e-4, 80
    epochs 0.481, level with 40); batch 32 0.467; the amplitude path 0.453. Full
    training from scratch stayed between 0.446 and 0.466 in every setting, 1 to 3
    points above chance (0.4375), so it cannot tell them apart; the frozen head
    moved by up to 6.5 points.
    ``probe_align=None``: on the selection splits, aligning each subject or block
    on its own windows (``"groups"``) is the strongest option found: over the three
    selection encoders, at one labelled unit, 0.654 ± 0.009 against 0.585 ± 0.033
    for the default, higher on four of the five tasks (MI imagined left vs right
    +11.5 points, MI executed left vs right +0.4, MI 4-class +4.4, fists vs feet
    +19.3) and 1.3 lower on EEGMAT, the one cross-subject task
    (``dev_tasks_selection_seeds.md``); without the encoder block, 0.698 (seed 0's
    rows). It is not the default for reasons of design, not of score: each group is
    standardised on its own windows, so a window's prediction depends on the
    windows predicted with it, where a scikit-learn estimator predicts each sample
    on its own; it needs the groups at ``predict`` as well as at ``fit``, which a
    scorer given by name does not pass, so the same data would score differently as
    arrays and as braindecode windows; and it erases a label that is the subject's
    own (patient vs control: one class per subject), a kind of task the
    development tasks do not hold. Use it when whole subjects or blocks are
    predicted with their groups and every group holds every class. On the test
    splits, scored once per encoder: 0.591 against 0.600 for the default with
    ``pars-small-v2`` and 0.562 against 0.587 with ``pars-small`` (five tasks).
    ``min_valid_groups=None``: picking the best epoch on held-out subjects did not
    help at any size the selection splits offer. On EEGMAT's selection split (the
    selection encoder; rows ``[min_valid_groups=2]`` of ``dev_tasks_selection.md``),
    with 4 and all 12 labelled subjects (one, then two or three of them held out),
    at lr 3e-4, the frozen head scored 0.523 and 0.523 with its epoch picked that
    way against 0.521 and 0.537 at its last epoch, and full training from scratch
    0.503 and 0.505 against 0.524 and 0.526. No development split labels more than
    12 subjects, so no threshold above that was measured: the default keeps the
    last epoch at every size, and an int turns the paper's practice (held-out
    subjects choose the epoch) on from that many groups. (The default was 30
    before, a value first set from test-subject scores.)

    Examples
    --------
    >>> from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    >>> from skorch.helper import SliceDataset
    >>> from braindecode_pars.datasets import load_physionet_mi
    >>> windows = load_physionet_mi(sfreq=100)  # doctest: +SKIP
    >>> blocks = windows.get_metadata()["block"]  # doctest: +SKIP
    >>> clf = PARSClassifier(pretrained_encoder="pars-small", max_epochs=20)
    >>> cross_val_score(clf, SliceDataset(windows), SliceDataset(windows, idx=1),
    ...                 groups=blocks, cv=LeaveOneGroupOut())  # doctest: +SKIP
    """

    # under metadata routing, ``score`` asks for the scored windows' groups (whether or
    # not ``fit`` asks for its own): the aligned probe aligns each subject on itself
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        module=MultiChannelClassifier,
        *,
        pretrain="pars",
        pretrained_encoder=None,
        encoder=None,
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
        probe_C=100.0,
        probe_align=None,
        encoder_lr_scale=1.0,
        amplitude=False,
        spatial_drop_prob=0.5,
        crop_seconds=None,
        n_eval_crops=5,
        augmentation=None,
        valid_fraction=0.2,
        min_valid_groups=None,
        checkpoint_dir=None,
        sfreq=None,
        random_state=None,
        criterion=torch.nn.CrossEntropyLoss,
        optimizer=torch.optim.AdamW,
        lr=3e-4,
        max_epochs=40,
        batch_size=16,
        callbacks=None,
        device="cpu",
        verbose=1,
        **kwargs,
    ):
        # set before skorch's __init__, which refuses modules (a PatchEncoder given as
        # pretrained_encoder) as attributes set after it
        self.pretrain = pretrain
        self.pretrained_encoder = pretrained_encoder
        self.encoder = encoder
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
        self.probe_C = probe_C
        self.probe_align = probe_align
        self.encoder_lr_scale = encoder_lr_scale
        self.amplitude = amplitude
        self.spatial_drop_prob = spatial_drop_prob
        self.crop_seconds = crop_seconds
        self.n_eval_crops = n_eval_crops
        self.augmentation = augmentation
        self.valid_fraction = valid_fraction
        self.min_valid_groups = min_valid_groups
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.non_deterministic = self.random_state is None
        return tags

    # -- fit -----------------------------------------------------------------------------
    def fit(self, X, y=None, groups=None, X_unlabeled=None, X_valid=None, y_valid=None):
        """Pretrain (unless an encoder is given or ``pretrain_epochs=0``), then fine-tune.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
            Labelled windows (see the class docstring for what is accepted).
        y : array-like, shape (n_windows,) | SliceDataset | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or session) of every window, for the validation rule (see
            ``min_valid_groups``); braindecode windows with a ``subject`` metadata
            column give theirs by themselves. Under scikit-learn's metadata routing
            (``clf.set_fit_request(groups=True)``), ``cross_val_score(..., params=
            {"groups": g})`` hands them to ``fit`` as well as to the splitter.
        X_unlabeled : windows or ndarray, like ``X`` | list of them | None
            More windows for pretraining only, at least ``pretrain_window_seconds`` long.
        X_valid, y_valid : like ``X`` and ``y`` | None
            A fixed validation set for choosing the best epoch.

        Returns
        -------
        self : PARSClassifier
        """
        with verbose_logging(self.verbose):
            return self._fit(X, y, groups, X_unlabeled, X_valid, y_valid)

    def _fit(self, X, y, groups, X_unlabeled, X_valid, y_valid):
        size = self._check_params()
        pretrained = self._load_pretrained()  # a bad file is refused before the data is read
        if X_valid is not None and self._finetune_strategy() == "probe":
            raise ValueError(
                "'X_valid' chooses the best fine-tuning epoch, but the probe "
                f"(finetune={self.finetune!r}) is a logistic regression with no epochs: "
                "leave 'X_valid' as None, or set finetune='frozen', 'full' or 'lp-ft'."
            )
        data = self._read(X, y, groups)
        classes = self._labels(data.y)
        sfreq = data.sfreq
        n_chans, n_times = data.shape
        patch = int(round(self.patch_seconds * sfreq))
        if n_times < patch:
            hint = ""
            if n_chans >= patch:
                hint = (
                    f" The windows are {n_chans} x {n_times}: if that is (n_times, n_chans), "
                    "the axes are swapped; windows are (n_windows, n_chans, n_times)."
                )
            raise ValueError(
                f"Windows of {n_times} samples are shorter than one patch of "
                f"patch_seconds={self.patch_seconds} s ({patch} samples at {sfreq} Hz).{hint}"
            )
        valid = None
        if X_valid is not None:
            valid = self._read(X_valid, y_valid, name="X_valid")
            self._labels(valid.y, "y_valid", at_least=1)
            if valid.shape != data.shape or abs(valid.sfreq - sfreq) > 1e-6:
                raise ValueError(
                    f"'X_valid' windows ({valid.shape} at {valid.sfreq} Hz) differ from 'X' "
                    f"({data.shape} at {sfreq} Hz)."
                )
            unknown = sorted(set(np.unique(valid.y).tolist()) - set(classes.tolist()))
            if unknown:
                raise ValueError(f"'y_valid' holds classes {unknown} that 'y' does not.")
        if pretrained is not None:
            self._check_pretrained(pretrained, sfreq)
        sources, n_pretrain = None, None
        if pretrained is None and self._pretrains():
            sources, lengths = [data.X], {"X": n_times}
            for unlabeled in self._read_unlabeled(X_unlabeled, sfreq):
                sources.append(unlabeled)
                lengths["X_unlabeled"] = min(
                    lengths.get("X_unlabeled", np.inf), unlabeled.shape[-1]
                )
            n_pretrain = self._pretraining_crop(sfreq, patch, lengths)

        self.seed_ = fit_seed(self.random_state)
        self.classes_inferred_ = classes
        self.sfreq_ = sfreq
        self.n_chans_, self.n_times_ = n_chans, n_times
        self.n_crop_ = self._crop_samples(n_times, sfreq, patch)
        self.finetune_ = self._finetune_strategy()
        codes = np.searchsorted(classes, data.y).astype(np.int64)
        if self.finetune_ == "probe":
            return self._fit_probe(data, codes, pretrained, size, sources, n_pretrain)
        if valid is not None:
            train = CodedWindows(data.X, codes)
            held_out = CodedWindows(valid.X, np.searchsorted(classes, valid.y))
            self.validation_ = "X_valid"
        else:
            train_idx, valid_idx, self.validation_ = self._split(codes, data.groups)
            train = CodedWindows(data.X, codes, train_idx)
            held_out = None if valid_idx is None else CodedWindows(data.X, codes, valid_idx)
        self.class_weight_ = class_weights(train.targets(), len(classes))
        if self.n_crop_ < n_times:
            train = RandomCrops(train, self.n_crop_)
            if held_out is not None:
                held_out = FixedCrops(held_out, self.n_crop_, self._eval_starts())
        with isolated_random_state(self.seed_, self.device):
            encoder, self.pretrain_history_ = self._encoder(
                sfreq, pretrained, size, sources, n_pretrain, data.groups
            )
            # what the skorch hooks read during this fit only (a dict: skorch refuses
            # modules as attributes set outside its initialize methods)
            self.fit_context_ = dict(
                encoder=encoder, valid=held_out, transforms=self._augmentation()
            )
            logger.info(
                "Fine-tuning (finetune=%r) on %d windows of %d channels x %g s for %d epochs "
                "on %s; validation: %s.",
                self.finetune_, len(train), n_chans, self.n_crop_ / sfreq, self.max_epochs,
                self.device, self.validation_,
            )  # fmt: skip
            try:
                super().fit(train, y=None)
            finally:
                del self.fit_context_
        return self

    def _fit_probe(self, data, codes, pretrained, size, sources, n_pretrain):
        """The encoder (given or pretrained here), then the probe over it."""
        if self.probe_align is not None:  # groups too small are refused before pretraining
            AlignedProbe._groups(data.groups, len(data), fit=True)
        self.validation_ = "none"
        self.class_weight_ = class_weights(codes, len(self.classes_inferred_))
        with isolated_random_state(self.seed_, self.device):
            encoder, self.pretrain_history_ = self._encoder(
                self.sfreq_, pretrained, size, sources, n_pretrain, data.groups
            )
            # module_ holds the encoder (encoder_, save_params); its head stays untrained
            self.fit_context_ = dict(encoder=encoder, valid=None, transforms=[])
            try:
                self.initialize()
            finally:
                del self.fit_context_
        logger.info(
            "Fitting the probe: a class-balanced logistic regression (C=%g) over the "
            "frozen encoder's per-channel features, log band power and the tangent space "
            "of %d windows of %d channels x %g s.",
            self.probe_C, len(data), self.n_chans_, self.n_times_ / self.sfreq_,
        )  # fmt: skip
        # a CPU copy: module_ lives on ``device``, and a pickled probe_ must load anywhere
        probe = self._probe(copy.deepcopy(encoder).cpu())
        if self.probe_align is None:
            self.probe_ = probe.fit(data.X, data.y)
            return self
        if data.groups is None:
            logger.warning(
                "probe_align='groups' but fit has no groups: the %d training windows are "
                "aligned as one group. Pass groups (the subject of each window), or "
                "braindecode windows with a 'subject' column, to align each subject.",
                len(data),
            )
        self.probe_ = probe.fit(data.X, data.y, groups=data.groups)
        return self

    def _probe(self, encoder):
        """The unfitted probe of ``finetune="probe"``: an :class:`AlignedProbe`, or
        the unaligned pipeline with ``probe_align=None``."""
        make = probe_pipeline if self.probe_align is None else AlignedProbe
        return make(
            encoder,
            sfreq=self.sfreq_,
            band_power=True,
            bands=bands_below_nyquist(self.sfreq_),
            tangent_space=True,
            C=self.probe_C,
            random_state=self.seed_,
            device=self.device,
        )

    def _encoder(self, sfreq, pretrained, size, sources, n_crop, groups=None):
        """The encoder to fine-tune: ``pretrained``, a new one of ``size``, or a new one
        pretrained on ``sources`` (arrays of windows; the first holds the labelled
        windows, of ``groups``), and the pretraining history.

        With ``groups``, the pretext skill is validated on whole groups (subjects)
        held out of pretraining where they allow it (each unlabelled window counts on
        its own); else each labelled window counts as its own recording.
        """
        if pretrained is not None:
            return pretrained, None
        size = dict(size, patch_seconds=self.patch_seconds)
        if sources is None:
            return PatchEncoder(sfreq=sfreq, **size), None
        view = SingleChannelWindows(sources, n_times=n_crop)
        view.sfreq = sfreq
        if groups is not None:
            labelled = [f"group {g}" for g in np.asarray(groups)]
            rest = [f"window {r}" for r in view.index[len(labelled) :, 0]]
            view.split_groups = np.asarray(labelled + rest)
        settings = self._pretraining_settings()
        valid = self.pretrain_valid_fraction or None
        epochs = settings["epochs"]
        if epochs is None:  # the step budget, over the windows the split leaves to train
            n_train = training_windows(view, valid)
            epochs = epochs_for_steps(settings["steps"], n_train, settings["batch_size"])
        folder = None if self.checkpoint_dir is None else Path(self.checkpoint_dir) / "pretrain"
        run = dict(max_epochs=epochs, lr=settings["lr"], batch_size=settings["batch_size"])
        run.update(device=self.device, valid_fraction=valid, progress_bar=bool(self.verbose))
        run["weight_decay"] = self.get_params_for("optimizer").get("weight_decay", 0.0)
        net = pretrain(
            view, self.pretrain, folder, encoder_kwargs=size, **run, **self._pretext_params()
        )
        return net.encoder.cpu(), net.history

    def _pretext_params(self):
        """Arguments of the pretext model named by ``pretrain``."""
        return pretext_params(self.pretrain, self.n_patches, self.pos_mask_ratio, self.mask_ratio)

    def _augmentation(self):
        if self.augmentation == "standard":
            return standard_augmentation(self.sfreq_, random_state=self.seed_)
        return list(self.augmentation or [])

    def _eval_starts(self):
        return crop_starts(self.n_times_, self.n_crop_, self.n_eval_crops)

    # -- skorch hooks --------------------------------------------------------------------
    def _set_signal_args(self, X, y, classes):
        """No inference: the module's signal arguments come from ``fit``."""

    def check_data(self, X, y):
        """No check: ``fit`` has checked the data already."""

    def get_params_for(self, prefix):
        """skorch's, plus what ``fit`` resolved: the module's signal arguments and
        encoder, and the class weights of the criterion; AdamW runs fused on a CPU or
        CUDA unless told otherwise (:func:`~braindecode_pars.training.optim.with_fused_default`)."""
        params = super().get_params_for(prefix)
        if prefix == "module" and hasattr(self, "fit_context_"):
            encoder = self.fit_context_["encoder"]
            resolved = dict(
                n_outputs=len(self.classes_inferred_),
                n_chans=self.n_chans_,
                n_times=self.n_crop_,
                sfreq=self.sfreq_,
                encoder=encoder,
                spatial_drop_prob=self.spatial_drop_prob,
                amplitude=self.amplitude,
                n_heads=encoder.n_heads,
            )
            params = {**resolved, **params}
        if prefix == "criterion" and hasattr(self, "class_weight_"):
            params.setdefault("weight", self.class_weight_)
        if prefix == "optimizer" and self.encoder_lr_scale != 1.0:
            groups = list(params.get("param_groups", []))
            if not any(pattern == "encoder.*" for pattern, _ in groups):
                params["param_groups"] = groups + [
                    ("encoder.*", {"lr": self.lr * self.encoder_lr_scale})
                ]
        if prefix == "optimizer":
            params = with_fused_default(self.optimizer, params, self.device)
        return params

    def initialize_module(self):
        if not hasattr(self, "fit_context_"):
            raise RuntimeError(
                "PARSClassifier builds its module in fit (the encoder comes from "
                "pretraining or 'pretrained_encoder'); call fit, not initialize."
            )
        return super().initialize_module()

    @property
    def _default_callbacks(self):
        """skorch's epoch timer, losses and table; the validation balanced accuracy and
        best epoch when a validation set exists; the freezing of the encoder; a
        progress bar when ``verbose``."""
        callbacks = [(name, cb) for name, cb in super()._default_callbacks if name != "valid_acc"]
        if getattr(self, "validation_", "none") != "none":
            callbacks.append(
                (
                    "valid_bal_acc",
                    EpochScoring(
                        _valid_balanced_accuracy,
                        name="valid_bal_acc",
                        lower_is_better=False,
                        use_caching=False,
                    ),
                )
            )
            callbacks.append(("best_valid_loss", best_epoch(self.checkpoint_dir)))
        strategy = getattr(self, "finetune_", "full")
        if strategy in ("frozen", "lp-ft"):
            callbacks.append(("freeze_encoder", Freezer("encoder.*")))
        if strategy == "lp-ft":
            at = max(1, self.max_epochs // 2) + 1
            callbacks.append(("unfreeze_encoder", Unfreezer("encoder.*", at=at)))
        if self.verbose:
            callbacks.append(("progress_bar", ProgressBar()))
        return callbacks

    def get_split_datasets(self, X, y=None, **fit_params):
        """The training set ``fit`` built, and its validation set (None: no split)."""
        return self.get_dataset(X, y), self.fit_context_["valid"]

    def get_iterator(self, dataset, training=False, drop_index=True):
        """Training batches through braindecode's ``AugmentedDataLoader`` when
        ``augmentation`` is set."""
        transforms = getattr(self, "fit_context_", {}).get("transforms")
        if training and transforms:
            kwargs = self.get_params_for("iterator_train")
            kwargs.setdefault("batch_size", self.batch_size)
            return AugmentedDataLoader(dataset, transforms=transforms, **kwargs)
        return super().get_iterator(dataset, training=training, drop_index=drop_index)

    # -- prediction ----------------------------------------------------------------------
    def _proba(self, windows, groups=None):
        """Class probabilities of :class:`CodedWindows` (averaged over crops); the
        ``groups`` of the windows align them with the aligned probe."""
        if self.finetune_ == "probe":
            if isinstance(self.probe_, AlignedProbe):
                return self.probe_.predict_proba(windows.X, groups=groups)
            return self.probe_.predict_proba(windows.X)
        if self.n_crop_ == self.n_times_:
            return EEGClassifier.predict_proba(self, windows)
        crops = FixedCrops(windows, self.n_crop_, self._eval_starts())
        return crops.average(EEGClassifier.predict_proba(self, crops))

    def _check_fitted(self):
        if not hasattr(self, "module_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )

    def _windows(self, data):
        return CodedWindows(data.X, np.zeros(len(data), dtype=np.int64))

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_`` order.

        With crops, the mean of the probabilities of ``n_eval_crops`` crops per window.
        ``groups`` (the subject of each window; None: the windows' own subjects, else
        all of ``X`` as one group) is read by the aligned probe only (``probe_align``).
        """
        self._check_fitted()
        data = self._read(X, groups=groups, fitted=True)
        return self._proba(self._windows(data), data.groups)

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,); ``groups`` as in :meth:`predict_proba`."""
        proba = self.predict_proba(X, groups=groups)
        return self.classes_[proba.argmax(axis=1)]

    def transform(self, X, groups=None):
        """Each window's embedding: the spatial head's pooled token, shape
        (n_windows, emb_dim) (the mean over crops when the model was fitted on crops);
        with the probe, the scaled features its logistic regression sees (per-channel
        encoder features, log band power, tangent space; aligned within ``groups``,
        as in :meth:`predict_proba`, with ``probe_align="groups"``).

        E.g. ``make_pipeline(PARSClassifier(...), LogisticRegression())``."""
        self._check_fitted()
        data = self._read(X, groups=groups, fitted=True)
        windows = self._windows(data)
        if self.finetune_ == "probe":
            if isinstance(self.probe_, AlignedProbe):
                return self.probe_.transform(windows.X, groups=data.groups)
            return self.probe_[:-1].transform(windows.X)
        dataset = windows
        if self.n_crop_ < self.n_times_:
            dataset = FixedCrops(windows, self.n_crop_, self._eval_starts())
        self.module_.eval()
        features = []
        with torch.no_grad():
            for Xi, _ in self.get_iterator(dataset, training=False):
                features.append(self.infer(Xi, return_features=True).cpu().numpy())
        features = np.concatenate(features)
        return dataset.average(features) if dataset is not windows else features

    def fit_transform(self, X, y=None, groups=None, **fit_params):
        """``fit``, then :meth:`transform` of the same windows with the same ``groups``
        (the aligned probe aligns them as ``fit`` did)."""
        return self.fit(X, y, groups=groups, **fit_params).transform(X, groups=groups)

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy on ``X``; labels are read from windows when ``y`` is None;
        ``groups`` as in :meth:`predict_proba`."""
        self._check_fitted()
        data = self._read(X, y, groups, fitted=True)
        self._labels(data.y, at_least=1)
        predicted = self.classes_[self._proba(self._windows(data), data.groups).argmax(axis=1)]
        return accuracy_score(data.y, predicted, sample_weight=sample_weight)

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """skorch's, for the neural strategies; a probe is refitted with ``fit``."""
        if getattr(self, "finetune_", None) == "probe":
            raise ValueError(
                "partial_fit trains the neural head, but this classifier was fitted with "
                "the probe (finetune_='probe'), a logistic regression: refit it with fit, "
                "or set finetune='frozen', 'full' or 'lp-ft' to train the head."
            )
        return super().partial_fit(X, y, classes=classes, **fit_params)

    def save_params(self, *args, **kwargs):
        """skorch's, for the neural strategies. A probe is a scikit-learn pipeline
        (``probe_``) that ``save_params`` does not hold: pickle the classifier."""
        if getattr(self, "finetune_", None) == "probe":
            raise ValueError(
                "save_params writes the neural head's weights, but this classifier was "
                "fitted with the probe (finetune_='probe'), whose logistic regression "
                "lives in probe_: save the whole classifier with pickle or joblib.dump."
            )
        return super().save_params(*args, **kwargs)

    @property
    def encoder_(self):
        """The fine-tuned :class:`PatchEncoder`."""
        self._check_fitted()
        return self.module_.encoder
