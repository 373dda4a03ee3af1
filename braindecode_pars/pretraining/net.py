"""Pretraining any pretext model through skorch, without labels: :class:`PretrainNet`.

Its callbacks are in :mod:`~braindecode_pars.pretraining.callbacks`, its run record and
resume check in :mod:`~braindecode_pars.pretraining.resume`, its validation on fixed draws
in :mod:`~braindecode_pars.pretraining._validation` (the split in
:mod:`~braindecode_pars.pretraining._split`), and its steps, which never wait for the
device, with the log they keep, in :mod:`~braindecode_pars.pretraining.steps`; how a fit
stops early, and a fit as a sitting of its run (folder held, stop signals, resumed to the
step), in :mod:`~braindecode_pars.pretraining.stopping`.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import EpochTimer
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, Subset

from braindecode_pars._jobs.workers import WorkerStart, start_method
from braindecode_pars._util.checks import check_device, check_option
from braindecode_pars._util.device_defaults import device_default
from braindecode_pars._util.logs import warn_once
from braindecode_pars._util.optim import with_fused_default
from braindecode_pars._util.seeding import (
    RUN_SEED_RANGE,
    STEP,
    _EpochBatches,
    _EpochOrder,
    derived_seed,
    seed_torch_generators,
)
from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder
from braindecode_pars.models.pair.kernels import DECODER_KERNEL_OPTIONS
from braindecode_pars.models.pretext.base import PretextModel
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining import resume as _resume
from braindecode_pars.pretraining._prefetch import _Prefetched
from braindecode_pars.pretraining._validation import _FixedValidation
from braindecode_pars.pretraining._views import (
    _DEVICE_CROPS_BYTES,
    SingleChannelWindows,
    _BatchedView,
    _DeviceBatches,
    _DeviceCrops,
    _HostBatches,
)
from braindecode_pars.pretraining.callbacks import (
    EpochProgress,
    PretextSkill,
    _EpochTable,
    _reports_epoch,
    _SamplerEpoch,
)
from braindecode_pars.pretraining.checkpoints import EncoderCheckpoint, StateCheckpoint
from braindecode_pars.pretraining.config import PAPER
from braindecode_pars.pretraining.disk_order import DiskOrderBatches
from braindecode_pars.pretraining.resume import RunMismatchError, data_fingerprint
from braindecode_pars.pretraining.schedule import (
    WarmupCosineLR,
    _batches_per_epoch,
    _draws_with_replacement,
)
from braindecode_pars.pretraining.steps import _AsyncSteps, _ReadLog
from braindecode_pars.pretraining.stopping import (
    StopHandling,
    _Sittings,
    _StopAtSignal,
    resolve_stop_signals,
)

logger = logging.getLogger(__name__)
#: The epoch table of a run (skorch's PrintLog): shown by the command line, and by
#: the estimators with ``verbose=2``.
epoch_logger = logging.getLogger(__name__ + ".epochs")

__all__ = [
    "EpochProgress",
    "PretextLoss",
    "PretextSkill",
    "PretrainNet",
    "RunMismatchError",
    "data_fingerprint",
]


class PretextLoss(nn.Module):
    """The criterion of a pretext model: the ``loss`` entry of the model's output dict."""

    def forward(self, y_pred, y_true=None):
        return y_pred["loss"]


def _from_store(dataset):
    """Whether ``dataset`` is a store-backed view, or a ``Subset`` of one."""
    if isinstance(dataset, Subset):
        dataset = dataset.dataset
    return isinstance(dataset, SingleChannelWindows) and dataset._store is not None


def _new_run_seed():
    """A new run's seed (:attr:`PretrainNet.run_seed_`): drawn from torch's global
    generator of rank 0, the same on every process."""
    seed = [int(torch.randint(0, RUN_SEED_RANGE, (), dtype=torch.int64))]
    if distributed._is_distributed():
        torch.distributed.broadcast_object_list(seed, src=0)
    return seed[0]


#: How a view's training batches reach the step (``PretrainNet(batches=...)``): "host",
#: drawn in the loop and copied by the step; "read-ahead", drawn by a thread into pinned
#: memory and copied on a side stream
#: (:class:`~braindecode_pars.pretraining._prefetch._Prefetched`); "device", the crops
#: drawn on the device from recordings uploaded once
#: (:class:`~braindecode_pars.pretraining._views._DeviceCrops`). "auto" takes the
#: device type's ``"batches"`` in
#: :data:`~braindecode_pars._util.device_defaults._DEVICE_DEFAULTS` where it applies.
BATCHES = ("auto", "host", "read-ahead", "device")


class PretrainNet(_Sittings, StopHandling, _FixedValidation, _AsyncSteps, NeuralNet):
    """skorch net that pretrains a pretext model (PARS, MAE, MP3, DropPos) on unlabelled data.

    ``fit(dataset)`` takes any dataset of ``(x, y)`` items with ``x`` a
    (1, n_times) single-channel window (``y`` is ignored), typically a
    :class:`~braindecode_pars.pretraining.SingleChannelWindows` view of braindecode
    windows. Defaults follow the paper (section 2.5): AdamW, lr 1e-4, weight decay
    1e-4, linear warm-up from 10 % of the rate over the first 10 % of epochs, then
    cosine annealing.

    Parameters
    ----------
    module : PretextModel | type
        The pretext model (an instance, or a class with ``module__`` parameters).
    max_epochs : int
        Epochs of the whole run (a resumed run counts the epochs already done).
        Paper: 1000.
    batch_size : int
        Paper: 512.
    lr : float
        Maximum learning rate. Paper: 1e-4.
    valid_fraction : float | None
        Share of the windows held out to measure the pretext loss and skill on data
        the model does not train on (a seeded split): whole recordings of a
        :class:`~braindecode_pars.pretraining.SingleChannelWindows` view (see
        :func:`held_out_recordings`; ``valid_split_`` is then ``"recordings"``), or
        whole groups of a view whose ``split_groups`` is set (``"groups"``),
        otherwise windows (``"windows"``). Their crops and channels are
        drawn once (at most ``max_valid_windows`` of them) and the model's patches
        and masks come from a generator reseeded before every validation pass, so
        the validation numbers of different epochs are comparable. None or 0: no
        validation (``train_split`` may also be given directly).
    max_valid_windows : int
        At most this many validation windows are kept (drawn with a fixed seed).
    checkpoint_dir : str | Path | None
        If given, the encoder is saved there on the cadence of
        ``checkpoint_every_minutes`` (``encoder_last.pt``) and when the validation loss
        (or, without validation, the training loss) improves (``encoder_best.pt``), and
        so is the whole training state (:class:`StateCheckpoint`: parameters, optimizer, history),
        crash-safe, with the run's settings in ``config.json``. ``fit`` then resumes
        from that state if it exists: the history and the learning-rate curve
        continue, and only the remaining epochs run. A folder whose saved settings
        differ from this net's (model, pretext settings, learning rate, batch size,
        weight decay, the data's fingerprint, the epoch budget) is refused with a
        :class:`RunMismatchError` that names the differences. The number of
        processes, ``compile`` and ``amp`` may change between sittings: the state is
        saved unwrapped (see :class:`StateCheckpoint`).
    run_info : dict | None
        Facts about the run written into ``config.json`` beside its settings but not
        compared on resume (the command line that launched it, the recordings), for
        its model card.
    allow_new_budget : bool
        Resume a run saved with another ``max_epochs``. The learning-rate curve is a
        function of the fraction of the run done, so the rate jumps to where the new
        budget puts the epochs already done (a warning says from what to what).
    warmup_fraction : float
        Fraction of the epochs of linear warm-up. Paper: 0.1.
    eval_every_steps : int
        Validation, the progress line and the epoch table's row come on a cadence:
        the first epoch, every epoch that ends a multiple of
        ``ceil(eval_every_steps / steps per epoch)`` epochs, and the last one; so a
        corpus whose epoch is one step does not pay a validation pass and its logs at
        every step. An epoch of as many steps or more is validated every epoch. The
        training losses, kept on the device, are read on the same cadence
        (:meth:`read_log`): a callback that reads an epoch's ``train_loss`` at its end
        finds it on these epochs (1: every epoch).
    checkpoint_every_minutes : float
        With ``checkpoint_dir``, the whole state and ``encoder_last.pt`` are written at
        the end of the first epoch that ends this long after the last write, at the end
        of the run, and when training stops early (Ctrl-C, a stop signal, a
        ``TimeLimit``, early stopping: :mod:`~braindecode_pars.pretraining.stopping`):
        a long run loses at most this much on a crash, and never what it had saved.
        When a stop comes within an epoch, the state saved holds the weights reached
        and the epochs completed, so the resumed run does the interrupted epoch again.
        ``encoder_best.pt`` is written on every validated epoch that improves.
    progress_bar : bool
        Show the progress over the epochs on stderr, with the skill and the time left
        (:class:`~braindecode_pars.pretraining.callbacks.EpochProgress`): a bar on a
        terminal, one plain line per reported epoch (``eval_every_steps``) when stderr
        goes to a file or a pipe.
    amp : bool
        Run the forward pass under bf16 autocast (``torch.autocast``) on the net's
        device (the folded PARS decoder leaves autocast and runs in float32). For
        ``torch.compile``, pass skorch's own ``compile=True`` (PARS compiles with no
        graph break, validation included: its draws are passed to the compiled module
        as tensors), and its mode as ``compile__mode`` (None, "default",
        "reduce-overhead", "max-autotune" or "max-autotune-no-cudagraphs"): with
        "reduce-overhead" or "max-autotune" the steps replay as CUDA graphs on a GPU,
        a step boundary marked before each.
    distributed : bool | None
        Train with torch's DistributedDataParallel, one process per device, as
        launched by ``torchrun`` (see
        :func:`~braindecode_pars.pretraining.distributed.init_distributed`).
        None: whenever a process group of several processes is initialised. Each
        process reads its own share of the data (a ``DistributedSampler``, reshuffled
        every epoch) with ``batch_size`` windows per step, so the global batch is
        ``batch_size * world_size``; batch losses are averaged over the processes,
        so every process records the same history; only rank 0 logs, shows progress
        and writes checkpoints. The model starts from the same weights on every
        process (DistributedDataParallel broadcasts rank 0's); then torch's global
        generator of process ``r`` is reseeded with ``torch.initial_seed() + r``, so
        that every process draws its own patches, masks, crops and channels even when
        all were seeded alike (as ``torchrun`` scripts usually are).
    store_read : {"random", "disk"}
        How the batches of a :meth:`~braindecode_pars.pretraining.SingleChannelWindows.from_store`
        view are read. ``"random"``: every batch draws random windows anywhere in the
        store (a ``DistributedSampler`` under DDP). ``"disk"``: in the order of the
        store's file, chunks of windows in a random order every epoch, shuffled in a
        buffer (:class:`~braindecode_pars.pretraining.disk_order.DiskOrderBatches`), for a
        store read from a disk rather than from the page cache; the DataLoader's
        ``in_order`` must stay True (``iterator_train__in_order=False`` is refused: the
        workers' batches are handed over in turn, the order a resumed run rebuilds).
        Either way an epoch reads every training window once and every process takes
        the same number of steps (its share padded to ``ceil(n / world_size)``
        windows). Other data is read at random.
    batches : {"auto", "host", "read-ahead", "device"}
        How the training batches of a
        :class:`~braindecode_pars.pretraining.SingleChannelWindows` view (or a
        ``Subset`` of one) reach the step. ``"host"``: each batch's crops are drawn in
        the training loop (or by DataLoader workers) and copied to the device by the
        step. ``"read-ahead"``: the next batches are drawn by a thread of this process
        and, on CUDA, copied to the device on a stream of their own, so that a step
        finds its batch there
        (:class:`~braindecode_pars.pretraining._prefetch._Prefetched`). ``"device"``:
        the view's recordings are uploaded to the net's device once per fit and every
        batch's starts, channels and crops are drawn there with torch operations
        (:class:`~braindecode_pars.pretraining._views._DeviceCrops`: the same bounds and
        distribution as the host draw), so no batch is drawn on the host or copied.
        The last two need a view read at random (``store_read="random"``) by this
        process (no DataLoader workers), and ``"device"`` recordings of at most 2 GiB
        as float32; they are refused otherwise, and work on any device, a CPU too.
        ``"auto"`` (the default): the device type's choice
        (:func:`~braindecode_pars._util.device_defaults.device_default`: ``"host"`` on
        every device until a GPU row times the others) where it applies, ``"host"``
        where it does not (a "device" choice reads ahead above the 2 GiB). Other
        datasets are read by a DataLoader whatever this says (only ``"auto"`` and
        ``"host"`` are taken then).
    decoder_kernel : {None, "auto", "tables", "fused"}
        The pair operator of a PARS model's cross-attention decoder, set on the module
        when the net is initialised (``PARS(decoder_kernel=...)``): the same values
        either way, to float32's rounding. None (the default): the module's own. A
        module without that decoder (MAE, MP3, DropPos, PARS's MLP decoder) ignores it.
    crops_on_device : None | "auto" | bool
        Deprecated, use ``batches``: True is ``batches="device"``, False
        ``batches="host"`` and "auto" ``batches="auto"`` (with a
        ``DeprecationWarning``). None: not given.
    stop_signals : "auto" | str | int | sequence | None
        Signals (names such as ``"SIGTERM"`` or ``"USR1"``, or numbers) that stop the
        run cleanly, as a cluster's scheduler does at a time limit or a preemption
        (SLURM's ``--signal``): while ``fit`` runs (in the main thread) they only set
        a flag; before the next training step the state is saved in
        ``checkpoint_dir`` (:class:`StateCheckpoint`, with the steps done of the
        current epoch) and ``fit`` raises
        :class:`~braindecode_pars.pretraining.TrainingStopped` (its ``reason``
        ``"signal"``, its ``exit_code`` ``128 + signal``). Fitting again
        with the same folder continues from that step: the epoch runs the steps it had
        left, on the learning-rate curve of an uninterrupted run, with its draws (every
        order, crop, channel, patch, mask and dropout of a run is seeded from the run's
        seed, ``run_seed_``, saved with the state, the rank, the epoch and the step), so
        that on a CPU, on the same number of torch threads (its sums round otherwise:
        ``state.json`` records the count and a resume on another warns), the weights end
        bit for bit as the run never stopped, in one process or under
        DistributedDataParallel (on a GPU,
        kernels that are not deterministic make any two runs differ). Alone, the flag is a
        Python variable read before every step; under DistributedDataParallel the
        processes agree through one all-reduce about every 5 seconds (a cadence in
        steps measured from the step time,
        :data:`~braindecode_pars.pretraining.stopping._AGREE_SECONDS`) and at the end of
        the reported epochs (no step waits for it otherwise), so all stop after the
        same step, about 5 s after the signal, and rank 0 saves: well within the 30 s
        torchrun grants before SIGKILL (torchrun forwards a signal other than
        SIGTERM, SIGINT, SIGHUP and SIGQUIT only when its ``--signals-to-handle``
        names it). DataLoader workers ignore these signals and end with the net's
        process, under every start method
        (:class:`~braindecode_pars._jobs.workers.WorkerStart`; a ``worker_init_fn`` of
        yours runs after it). SIGINT (Ctrl-C) cannot be one: it raises
        ``KeyboardInterrupt``, as in Python. Default, ``"auto"``: SIGTERM when
        ``checkpoint_dir`` is set, none otherwise (without a folder a stop would save
        nothing, and a SIGTERM keeps its default action: it ends the process, as a
        joblib, Dask or Ray worker, or a notebook's kernel, expects). None: none.
    The history records ``train_loss`` and ``train_skill`` every epoch and, with
    validation, ``valid_loss`` and ``valid_skill`` every reported epoch (see
    :class:`PretextSkill`); the progress bar shows them. No step waits for the device
    to record them: the values stay on it and are read at the end of every reported
    epoch, of the run, and before a checkpoint (:meth:`read_log`), when the epochs
    ended since get theirs. An epoch is a shuffled pass
    over the training windows in full batches (a short last batch is left out, so that
    a compiled step keeps one graph), or, when a process has fewer of them than
    ``batch_size``, one step of ``batch_size`` windows drawn with replacement (each
    window gives a new random channel and crop whenever it is drawn). A module given
    as an instance is trained in place, as skorch does; pass ``copy.deepcopy(model)``
    to keep the original.

    **kwargs
        Any other :class:`skorch.NeuralNet` argument (``optimizer__weight_decay``,
        ``device``, ``train_split``, ``callbacks``, ``iterator_train__num_workers``...).

    Examples
    --------
    >>> import torch
    >>> from braindecode_pars import PARS
    >>> from braindecode_pars.pretraining import PretrainNet
    >>> model = PARS(n_times=300, sfreq=10, n_patches=10, emb_dim=16, depth=1, n_heads=2,
    ...              ff_dim=16)
    >>> X = torch.utils.data.TensorDataset(torch.randn(32, 1, 300), torch.zeros(32))
    >>> net = PretrainNet(model, max_epochs=2, batch_size=16, progress_bar=False)
    >>> len(net.fit(X).history)
    2
    """

    def __init__(
        self,
        module,
        *args,
        criterion=PretextLoss,
        optimizer=torch.optim.AdamW,
        lr=PAPER.lr,
        max_epochs=PAPER.max_epochs,
        batch_size=PAPER.batch_size,
        train_split=None,
        iterator_train__shuffle=True,
        valid_fraction=None,
        max_valid_windows=2048,
        checkpoint_dir=None,
        warmup_fraction=0.1,  # paper section 2.5: 100 of 1000 epochs
        eval_every_steps=200,
        checkpoint_every_minutes=5.0,
        progress_bar=True,
        amp=False,
        distributed=None,
        allow_new_budget=False,
        run_info=None,
        store_read="random",
        stop_signals="auto",
        batches="auto",
        decoder_kernel=None,
        crops_on_device=None,
        **kwargs,
    ):
        kwargs.setdefault("optimizer__weight_decay", PAPER.weight_decay)
        super().__init__(
            module,
            *args,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            iterator_train__shuffle=iterator_train__shuffle,
            **kwargs,
        )
        self.valid_fraction = valid_fraction
        self.max_valid_windows = max_valid_windows
        self.checkpoint_dir = checkpoint_dir
        self.warmup_fraction = warmup_fraction
        self.eval_every_steps = eval_every_steps
        self.checkpoint_every_minutes = checkpoint_every_minutes
        self.progress_bar = progress_bar
        self.amp = amp
        self.distributed = distributed
        self.allow_new_budget = allow_new_budget
        self.run_info = run_info
        self.store_read = store_read
        self.stop_signals = stop_signals
        self.batches = batches
        self.decoder_kernel = decoder_kernel
        self.crops_on_device = crops_on_device
        if crops_on_device is not None:
            warn_once(
                "'crops_on_device' is deprecated and will be removed in the next release: "
                f"use batches={_batches_of(crops_on_device)!r} (True: 'device', False: "
                "'host').",
                DeprecationWarning,
                stacklevel=2,
            )

    @property
    def distributed_(self):
        """Whether this net trains with DistributedDataParallel."""
        return distributed._is_distributed() if self.distributed is None else self.distributed

    def get_default_callbacks(self):
        callbacks = [
            ("read_log", _ReadLog()),  # first: the others read what it reads
            ("epoch_timer", EpochTimer()),
            ("pretext_skill", PretextSkill()),
            ("lr_schedule", WarmupCosineLR(warmup_fraction=self.warmup_fraction)),
            ("sampler_epoch", _SamplerEpoch()),
        ]
        if distributed.rank() != 0:  # only rank 0 shows progress, logs and writes
            return [*callbacks, ("stop_at_signal", _StopAtSignal())]
        if self.progress_bar:
            name = getattr(self.module, "__name__", type(self.module).__name__)
            callbacks.append(("progress_bar", EpochProgress(f"pretraining {name}")))
        if self.checkpoint_dir is not None:
            minutes = self.checkpoint_every_minutes
            callbacks += [
                (
                    "encoder_checkpoint",
                    EncoderCheckpoint(self.checkpoint_dir, every_minutes=minutes),
                ),
                ("state_checkpoint", StateCheckpoint(self.checkpoint_dir, every_minutes=minutes)),
            ]
        callbacks.append(("print_log", _EpochTable(sink=epoch_logger.info)))
        callbacks.append(("stop_at_signal", _StopAtSignal()))  # last: after the checkpoints
        return callbacks

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        """A run without a seed yet (a new one, not resumed from a state that holds its
        seed) draws one: :attr:`run_seed_`."""
        super().on_train_begin(net, X=X, y=y, **kwargs)
        if getattr(self, "run_seed_", None) is None:
            self.run_seed_ = _new_run_seed()

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """Every validation pass starts a generator with the same seed (the same draws);
        whether this epoch is validated and reported (``eval_every_steps``); where a
        resumed epoch's batches start."""
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        device = self.device if str(self.device).startswith("cuda") else "cpu"
        self.valid_generator_ = torch.Generator(device=device).manual_seed(0)
        self.reports_epoch_ = True
        self.epoch_step_offset_ = self.epoch_restored_steps_ = 0
        if dataset_train is not None:
            per_epoch = self.epoch_steps_ = self.steps_per_epoch(len(dataset_train))
            self.reports_epoch_ = _reports_epoch(
                len(self.history), self.max_epochs, per_epoch, self.eval_every_steps
            )
            self.epoch_step_offset_ = self._resumed_steps(per_epoch)
            restored = self._resumed_batches(self.epoch_step_offset_)
            self.history[-1]["batches"].extend(restored)  # the steps done before the stop
            self.epoch_restored_steps_ = len(restored)
            batches = getattr(self, "train_sampler_", None)
            if isinstance(batches, _EpochBatches | DiskOrderBatches):  # skipped, not drawn
                batches.start = self.epoch_step_offset_

    def _seed_step(self, place):
        """Before training step ``place`` (0-based) of this epoch: torch's global
        generators (CPU and devices) seeded from the run's seed, this process's rank, the
        epoch and ``place`` alone, so that the step's draws (patches, masks, dropout) are
        those of the same step of the run never stopped."""
        seed = getattr(self, "run_seed_", None)
        if seed is not None:
            rank = distributed.rank() if self.distributed_ else 0
            seed_torch_generators(derived_seed(seed, STEP, rank, len(self.history), place))

    def steps_per_epoch(self, n_windows):
        """Optimiser steps of one process per epoch over ``n_windows`` training windows."""
        world = distributed.world_size() if self.distributed_ else 1
        return _batches_per_epoch(n_windows, self.batch_size, world)

    def get_iterator(self, dataset, training=False):
        """Training batches: a shuffled pass over the windows (a DistributedSampler's
        share of them when distributed) without its short last batch, or, when a process
        has fewer training windows than ``batch_size``, one step of ``batch_size`` windows
        drawn with replacement per epoch, so that every step trains on a full batch of
        crops (and a compiled step keeps one graph of one shape). The crops of a
        :class:`~braindecode_pars.pretraining.SingleChannelWindows` view are drawn a batch
        at a time into one array
        (:class:`~braindecode_pars.pretraining._views._BatchedView`), in pinned
        memory on CUDA. With worker processes (``iterator_train__num_workers``), one
        DataLoader serves every epoch of a fit and keeps its workers
        (``persistent_workers``), so that an epoch of a few batches does not start them
        anew."""
        if not training:
            return super().get_iterator(dataset, training=training)
        kept = getattr(self, "_train_loader", None)
        if kept is not None and kept[0] is dataset:
            return kept[1]
        loader = self._train_iterator(dataset)
        if getattr(loader, "persistent_workers", False):
            self._train_loader = (dataset, loader)
        return loader

    def _train_iterator(self, dataset):
        """A new training DataLoader of :meth:`get_iterator`."""
        world = distributed.world_size() if self.distributed_ else 1
        short = _draws_with_replacement(len(dataset), self.batch_size, world)
        batched = _BatchedView.reads(dataset)
        kwargs = self.get_params_for("iterator_train")
        # every batch full (a short epoch's one batch is drawn with replacement): one
        # shape, one graph for a compiled step; steps_per_epoch counts so
        if not kwargs.pop("drop_last", True):
            raise ValueError(
                "'iterator_train__drop_last' must be True (every pretraining step trains "
                "a full batch, so that a compiled step keeps one graph), but got False."
            )
        asked = self._batches_asked()
        self.batches_ = "host"  # what the fit takes (a view's: below)
        if asked in ("read-ahead", "device") and not batched:
            raise ValueError(
                f"batches={asked!r} draws the crops of a SingleChannelWindows view (or a "
                f"Subset of one), but the training data is a {type(dataset).__name__}."
            )
        loader_class = self.iterator_train
        if not (isinstance(loader_class, type) and issubclass(loader_class, DataLoader)):
            loader_class = None
        if not (self.distributed_ or short or batched or loader_class):
            kwargs.setdefault("batch_size", self.batch_size)
            if kwargs["batch_size"] == -1:  # skorch's: the whole dataset
                kwargs["batch_size"] = len(dataset)
            return self.iterator_train(dataset, **kwargs)
        shuffle = kwargs.pop("shuffle", True)
        batch_size = kwargs.pop("batch_size", self.batch_size)
        if batch_size == -1:  # skorch's: the whole dataset
            batch_size = len(dataset)
        # every order and draw a function of the run's seed and its place in the run
        if getattr(self, "run_seed_", None) is None:  # asked outside a fit
            self.run_seed_ = _new_run_seed()
        seed, rank = self.run_seed_, distributed.rank() if self.distributed_ else 0
        check_option("store_read", self.store_read, ("random", "disk"))
        disk_order = batched and not short and self.store_read == "disk" and _from_store(dataset)
        if asked in ("read-ahead", "device") and disk_order:
            raise ValueError(
                f"batches={asked!r} draws the crops at random: 'store_read' must be "
                "'random', but got 'disk'."
            )
        if disk_order and not kwargs.get("in_order", True):
            raise ValueError(
                "'iterator_train__in_order' must be True with store_read='disk', but got "
                "False: the disk order hands the DataLoader workers' batches over in turn, "
                "the order a resumed run rebuilds; out of order, the batches would come as "
                "the workers finish them. Leave it at True, or use store_read='random'."
            )
        if disk_order:
            stream = self.train_sampler_ = DiskOrderBatches(
                dataset,
                batch_size,
                seed=seed,
                rank=rank,
                world_size=world,
                drop_last=True,
            )  # _SamplerEpoch sets its epoch, as a DistributedSampler's
            return DataLoader(stream, batch_size=None, **kwargs)
        if short:  # each process draws its own (the rank is in their seed)
            order = _EpochOrder(len(dataset), seed, draws=batch_size, rank=rank)
        elif self.distributed_:
            order = DistributedSampler(dataset, shuffle=True, seed=seed)
        else:
            order = _EpochOrder(len(dataset), seed, shuffle=shuffle)
        # _SamplerEpoch sets its epoch, on_epoch_begin where a resumed epoch starts
        batches = self.train_sampler_ = _EpochBatches(order, batch_size, seed, rank, batched)
        if not batched:
            return (loader_class or DataLoader)(dataset, batch_sampler=batches, **kwargs)
        chosen = self._batches_in_force(dataset, kwargs)
        self.batches_ = chosen
        if chosen == "device":
            return _DeviceBatches(self._device_crops(dataset), batches, dataset)
        # (get_params_for pins on CUDA) with no workers, batches are drawn into pinned memory
        pinned = bool(kwargs.get("pin_memory")) and not kwargs.get("num_workers", 0)
        view = _BatchedView(dataset, pinned=pinned)
        if chosen == "host" and _in_process(kwargs):
            return _HostBatches(view, batches)  # a DataLoader's batches, without its work
        loader = DataLoader(view, sampler=batches, batch_size=None, **kwargs)
        if chosen == "read-ahead":  # the next batches drawn and copied beside the step
            return _Prefetched(loader, self.device, prepare=view.view._generator,
                               take=self._epoch_draws)  # fmt: skip
        return loader

    def _epoch_draws(self):
        """Batches the coming training pass takes from its iterator: the rest of a
        resumed epoch and the one read before the loop stops (``run_single_epoch``), or
        None (all)."""
        per_epoch = getattr(self, "epoch_steps_", None)
        offset = getattr(self, "epoch_step_offset_", 0)
        return per_epoch - offset + 1 if per_epoch and offset else None

    def _batches_asked(self):
        """``batches`` checked, with the deprecated ``crops_on_device`` in its place when
        only that was given."""
        check_option("batches", self.batches, BATCHES)
        if self.crops_on_device is None:
            return self.batches
        if self.crops_on_device not in (True, False, "auto"):
            raise ValueError(
                "Invalid value for the 'crops_on_device' parameter (deprecated: use "
                "'batches'). Allowed values are 'auto', True and False, but got "
                f"{self.crops_on_device!r} instead."
            )
        if self.batches != "auto":
            raise ValueError(
                f"'crops_on_device' (deprecated) and 'batches' were both given "
                f"({self.crops_on_device!r} and {self.batches!r}): give 'batches' only."
            )
        return _batches_of(self.crops_on_device)

    def _batches_in_force(self, dataset, loader_kwargs):
        """How the batches of ``dataset``, a view (or a Subset of one) read at random,
        reach the step: ``batches`` (:data:`BATCHES`) checked against what the fit allows,
        "auto" the device type's default where it applies."""
        asked = self._batches_asked()
        workers = loader_kwargs.get("num_workers", 0)
        view = dataset.dataset if isinstance(dataset, torch.utils.data.Subset) else dataset
        needed = _DeviceCrops.bytes_needed(view)
        if asked in ("read-ahead", "device") and workers:
            raise ValueError(
                f"batches={asked!r} draws the crops in the training process: "
                f"'iterator_train__num_workers' must be 0, but got {workers}."
            )
        if asked == "device" and needed > _DEVICE_CROPS_BYTES:
            raise ValueError(
                f"batches='device' needs the recordings on the device: at most "
                f"{_DEVICE_CROPS_BYTES} bytes, but they take {needed}; use "
                "batches='read-ahead', 'host' or 'auto'."
            )
        if asked != "auto":
            return asked
        chosen = device_default("batches", self._device_type())
        if workers:  # DataLoader workers read ahead themselves
            return "host"
        if chosen == "device" and needed > _DEVICE_CROPS_BYTES:
            return "read-ahead"
        return chosen

    def _device_type(self):
        return torch.device(self.device).type if self.device else "cpu"

    def _device_crops(self, dataset):
        """The view's recordings on the device (:class:`_DeviceCrops`), uploaded once per
        fit and view."""
        view = dataset.dataset if isinstance(dataset, torch.utils.data.Subset) else dataset
        kept = getattr(self, "_crops_kept", None)
        if kept is None or kept[0] is not view:
            device = self.device if self.device else "cpu"
            kept = self._crops_kept = (view, _DeviceCrops(view, device))
        return kept[1]

    def get_params_for(self, prefix):
        """skorch's; AdamW (and Adam) run fused on a CPU or CUDA unless told otherwise
        (:func:`~braindecode_pars._util.optim.with_fused_default`), training
        DataLoader workers persist across epochs and, on CUDA, training and validation
        batches come in pinned memory (so that their copy to the device waits for
        nothing), unless told otherwise. DataLoader workers start with
        :class:`~braindecode_pars._jobs.workers.WorkerStart` (they end with this process
        under the start method of ``multiprocessing_context``), then run the
        ``worker_init_fn`` given, if any."""
        params = super().get_params_for(prefix)
        if prefix == "optimizer":
            params = with_fused_default(self.optimizer, params, self.device)
        if prefix in ("iterator_train", "iterator_valid"):
            params.setdefault("pin_memory", torch.device(self.device).type == "cuda")
            if params.get("num_workers", 0) > 0:
                if prefix == "iterator_train":
                    params.setdefault("persistent_workers", True)
                # no worker outlives the run; kept workers (which the net ends itself when
                # training ends) ignore the stop signals, so that a signal sent to every
                # process of a job reaches the run alone and it stops at a step boundary
                kept = params.get("persistent_workers", False)
                ignore = (
                    resolve_stop_signals(self.stop_signals, self.checkpoint_dir) if kept else ()
                )
                params["worker_init_fn"] = WorkerStart(
                    start_method(params.get("multiprocessing_context")),
                    ignore=ignore,
                    then=params.get("worker_init_fn"),
                )
        return params

    @property
    def pretext_(self):
        """The pretext model, unwrapped from DistributedDataParallel and torch.compile."""
        module = self.module_
        while True:
            if isinstance(module, DistributedDataParallel):
                module = module.module
            elif hasattr(module, "_orig_mod"):  # torch.compile's OptimizedModule
                module = module._orig_mod
            else:
                return module

    @property
    def encoder(self):
        """The pretrained :class:`~braindecode_pars.PatchEncoder` (after ``initialize``)."""
        return self.pretext_.encoder

    def initialize_module(self):
        check_device("device", self.device)
        self._check_compile_mode()
        self._batches_asked()
        if self.decoder_kernel is not None:
            check_option("decoder_kernel", self.decoder_kernel, (None, *DECODER_KERNEL_OPTIONS))
        super().initialize_module()
        if not isinstance(self.pretext_, PretextModel):
            raise TypeError(
                "'module' must be a pretext model of braindecode_pars (PARS, MAE, MP3, "
                f"DropPos), but got {type(self.pretext_).__name__}."
            )
        decoder = getattr(self.pretext_, "decoder", None)
        if self.decoder_kernel is not None and isinstance(decoder, CrossAttentionPairDecoder):
            decoder.kernel = self.decoder_kernel  # read at the first forward (and trace)
        if self.distributed_ and not isinstance(self.module_, DistributedDataParallel):
            module = self.pretext_.to(self.device)
            device_ids = [module.encoder.norm.weight.device] if "cuda" in str(self.device) else None
            self.module_ = DistributedDataParallel(
                module,
                device_ids=device_ids,
                find_unused_parameters=not module.uses_all_parameters,
            )  # broadcasts rank 0's weights: every process starts from the same model
            seed = torch.initial_seed() + distributed.rank()
            torch.manual_seed(seed)  # ...and draws its own patches, masks, crops, channels
            logger.debug("Process %d draws from seed %d.", distributed.rank(), seed)
        return self

    def run_config(self, X=None):
        """The settings a resumed run must share (see
        ``training.resume._run_config``)."""
        return _resume._run_config(self, X)

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """skorch's; the fixed validation draws are made anew from ``X`` (the same data
        gives the same draws, seeded; other data its own), then kept for its epochs. An
        encoder that reads amplitude (``normalization`` "window+scale" or "fixed") has
        the unit of ``X`` checked once, on the host, on a seeded sample of its windows
        (:func:`_unit_sample`, :meth:`PatchEncoder.check_unit
        <braindecode_pars.PatchEncoder.check_unit>`) before the first step, and its
        forward passes check nothing while it trains (no host wait per step, no
        device-side assertion in a compiled graph)."""
        self._valid_fixed = None
        if not getattr(self, "initialized_", False):
            self.initialize()  # as skorch's would: the encoder is the module's
        encoder = self.encoder
        try:
            if encoder.config.amplitude_aware:
                encoder.check_unit(_unit_sample(X))  # once, on the host, before any step
                encoder._unit_checked = True  # ...so that no forward pass checks it again
            return super().partial_fit(X, y, classes=classes, **fit_params)
        finally:  # also when training ends by an error, which skips on_train_end
            encoder._unit_checked = False  # an encoder used after the fit checks again
            _end_workers(getattr(self, "_train_loader", None))
            self._train_loader = None
            self._crops_kept = None  # the recordings on the device go with the fit
            for _, callback in getattr(self, "callbacks_", []):
                if isinstance(callback, EpochProgress):
                    callback.close()


#: Windows of the seeded sample whose unit a fit checks (:func:`_unit_sample`).
_UNIT_SAMPLE = 256


def _unit_sample(dataset, n=_UNIT_SAMPLE, seed=0):
    """At most ``n`` windows of ``dataset`` (items ``(x, y)``), drawn with a seeded
    generator of their own, on the host: a
    :class:`~braindecode_pars.pretraining.SingleChannelWindows` view (or a ``Subset`` of
    one) draws their crops and channels as
    :meth:`~braindecode_pars.pretraining.SingleChannelWindows.log_std_statistics` does,
    leaving the training draws as they were."""
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(dataset), size=min(n, len(dataset)), replace=False))
    base = dataset
    if isinstance(dataset, Subset):
        base, picked = dataset.dataset, np.asarray(dataset.indices)[picked]
    if isinstance(base, SingleChannelWindows):
        return base._draw(np.asarray(picked, dtype=np.int64), rng)
    return torch.stack([torch.as_tensor(base[int(i)][0]) for i in picked])


#: The DataLoader arguments under which a loader without worker processes hands out the
#: batches of a :class:`_BatchedView` as they are (``pin_memory``: the view writes them
#: into pinned memory itself): its batches are then read in this process without it.
_IN_PROCESS_ARGUMENTS = frozenset({"num_workers", "pin_memory"})


def _in_process(loader_kwargs):
    """Whether a DataLoader with ``loader_kwargs`` (and ``batch_size=None``) would hand
    out a view's batches as they are, read in this process: no worker process, and no
    argument that changes or checks what it hands out (a ``collate_fn``, a worker's
    settings, which it refuses without workers)."""
    return not loader_kwargs.get("num_workers", 0) and set(loader_kwargs) <= _IN_PROCESS_ARGUMENTS


def _batches_of(crops_on_device):
    """The ``batches`` that the deprecated ``crops_on_device`` stands for."""
    return {True: "device", False: "host"}.get(crops_on_device, "auto")


def _end_workers(kept):
    """End the worker processes of a kept training DataLoader (``(dataset, loader)``)
    now, as its iterator does when it is collected (a traceback that holds it would keep
    them to the interpreter's exit)."""
    if kept is None:
        return
    loader = kept[1]
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    loader._iterator = None
