"""Pretraining any pretext model through skorch, without labels."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, EpochTimer, PassthroughScoring, PrintLog, ProgressBar
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from ..models.pretext import PretextModel
from . import distributed
from .checkpoints import AtomicCheckpoint, EncoderCheckpoint
from .schedule import WarmupCosineLR

logger = logging.getLogger(__name__)


class PretextLoss(nn.Module):
    """The criterion of a pretext model: the ``loss`` entry of the model's output dict."""

    def forward(self, y_pred, y_true=None):
        return y_pred["loss"]


class _SamplerEpoch(Callback):
    """Give the distributed sampler the epoch number, so that every epoch reshuffles."""

    def on_epoch_begin(self, net, **kwargs):
        sampler = getattr(net, "train_sampler_", None)
        if sampler is not None:
            sampler.set_epoch(len(net.history))


class PretrainNet(NeuralNet):
    """skorch net that pretrains a pretext model (PARS, MAE, MP3, DropPos) on unlabelled data.

    ``fit(dataset)`` takes any dataset of ``(x, y)`` items with ``x`` a
    (1, n_times) single-channel window (``y`` is ignored), typically a
    :class:`~braindecode_pars.datasets.SingleChannelWindows` view of braindecode
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
    checkpoint_dir : str | Path | None
        If given, the encoder is saved there after every epoch
        (``encoder_last.pt``) and when the loss improves (``encoder_best.pt``), and so
        is the whole training state (``params.pt``, ``optimizer.pt``,
        ``history.json``), atomically. ``fit`` then resumes from that state if it
        exists: the history and the learning-rate curve continue, and only the
        remaining epochs run.
    warmup_fraction : float
        Fraction of the epochs of linear warm-up. Paper: 0.1.
    progress_bar : bool
        Show a progress bar over the batches of each epoch.
    amp : bool
        Run the forward pass under bf16 autocast (``torch.autocast``) on the net's
        device. The PARS decoder keeps its float64 factor tables. For
        ``torch.compile``, pass skorch's own ``compile=True``.
    distributed : bool | None
        Train with torch's DistributedDataParallel, one process per device, as
        launched by ``torchrun`` (see :func:`~braindecode_pars.training.init_distributed`).
        None: whenever a process group of several processes is initialised. Each
        process reads its own share of the data (a ``DistributedSampler``, reshuffled
        every epoch) with ``batch_size`` windows per step, so the global batch is
        ``batch_size * world_size``; batch losses are averaged over the processes,
        so every process records the same history; only rank 0 logs, shows progress
        and writes checkpoints.
    **kwargs
        Any other :class:`skorch.NeuralNet` argument (``optimizer__weight_decay``,
        ``device``, ``train_split``, ``callbacks``, ``iterator_train__num_workers``...).

    Examples
    --------
    >>> import torch
    >>> from braindecode_pars import PARS
    >>> from braindecode_pars.training import PretrainNet
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
        lr=1e-4,  # paper section 2.5
        max_epochs=1000,  # paper section 2.5
        batch_size=512,  # paper section 2.5
        train_split=None,
        iterator_train__shuffle=True,
        checkpoint_dir=None,
        warmup_fraction=0.1,  # paper section 2.5: 100 of 1000 epochs
        progress_bar=True,
        amp=False,
        distributed=None,
        **kwargs,
    ):
        kwargs.setdefault("optimizer__weight_decay", 1e-4)  # paper section 2.5
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
        self.checkpoint_dir = checkpoint_dir
        self.warmup_fraction = warmup_fraction
        self.progress_bar = progress_bar
        self.amp = amp
        self.distributed = distributed

    @property
    def distributed_(self):
        """Whether this net trains with DistributedDataParallel."""
        return distributed.is_distributed() if self.distributed is None else self.distributed

    def get_default_callbacks(self):
        callbacks = [
            ("epoch_timer", EpochTimer()),
            ("train_loss", PassthroughScoring(name="train_loss", on_train=True)),
            ("valid_loss", PassthroughScoring(name="valid_loss")),
            ("lr_schedule", WarmupCosineLR(warmup_fraction=self.warmup_fraction)),
            ("sampler_epoch", _SamplerEpoch()),
        ]
        if distributed.rank() != 0:  # only rank 0 shows progress, logs and writes
            return callbacks
        if self.progress_bar:
            callbacks.append(("progress_bar", ProgressBar()))
        if self.checkpoint_dir is not None:
            callbacks += [
                ("encoder_checkpoint", EncoderCheckpoint(self.checkpoint_dir)),
                ("state_checkpoint", self._state_checkpoint()),
            ]
        callbacks.append(("print_log", PrintLog(sink=logger.info)))
        return callbacks

    def _state_checkpoint(self):
        return AtomicCheckpoint(
            monitor=None,  # every epoch: the state to resume from
            dirname=str(self.checkpoint_dir),
            f_params="params.pt",
            f_optimizer="optimizer.pt",
            f_criterion=None,
            f_history="history.json",
            sink=logger.info,
        )

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
        super().initialize_module()
        if not isinstance(self.pretext_, PretextModel):
            raise TypeError(
                "'module' must be a pretext model of braindecode_pars (PARS, MAE, MP3, "
                f"DropPos), but got {type(self.pretext_).__name__}."
            )
        if self.distributed_ and not isinstance(self.module_, DistributedDataParallel):
            module = self.pretext_.to(self.device)
            device_ids = [module.encoder.norm.weight.device] if "cuda" in str(self.device) else None
            self.module_ = DistributedDataParallel(
                module,
                device_ids=device_ids,
                find_unused_parameters=not module.uses_all_parameters,
            )
        return self

    def get_iterator(self, dataset, training=False):
        """Training batches come from a DistributedSampler when distributed."""
        if not (training and self.distributed_):
            return super().get_iterator(dataset, training=training)
        kwargs = self.get_params_for("iterator_train")
        kwargs.pop("shuffle", None)
        kwargs.setdefault("batch_size", self.batch_size)
        self.train_sampler_ = DistributedSampler(dataset, shuffle=True)
        return DataLoader(dataset, sampler=self.train_sampler_, **kwargs)

    def infer(self, x, **fit_params):
        """The module's forward pass, under bf16 autocast when ``amp`` is set."""
        device_type = torch.device(self.device).type
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bool(self.amp)):
            return super().infer(x, **fit_params)

    def train_step(self, batch, **fit_params):
        """One optimisation step; the recorded loss is the mean over processes."""
        step = super().train_step(batch, **fit_params)
        if self.distributed_:
            step["loss"] = distributed.average_across_ranks(step["loss"])
        return step

    def fit(self, X, y=None, **fit_params):
        """Pretrain for ``max_epochs``, resuming from ``checkpoint_dir`` when it holds a run."""
        if not (self.warm_start and self.initialized_):
            self.initialize()
        done = 0
        state = Path(self.checkpoint_dir) / "params.pt" if self.checkpoint_dir else None
        if state is not None and state.is_file() and not self.warm_start:
            self.load_params(checkpoint=self._state_checkpoint())
            done = len(self.history)
            logger.info("Resuming pretraining from %s after %d epochs.", state.parent, done)
        epochs = self.max_epochs - done
        if epochs > 0:
            self.partial_fit(X, y, epochs=epochs, **fit_params)
        return self
