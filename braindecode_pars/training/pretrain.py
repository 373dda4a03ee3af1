"""Pretraining any pretext model through skorch, without labels."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, EpochTimer, PassthroughScoring, PrintLog, ProgressBar
from skorch.dataset import ValidSplit
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset

from .._checks import check_int, check_range
from ..datasets.single_channel import SingleChannelWindows
from ..models.pretext import PretextModel, pretext_skill
from . import distributed
from .checkpoints import EncoderCheckpoint, StateCheckpoint
from .interrupt import PropagateInterrupt
from .schedule import WarmupCosineLR

logger = logging.getLogger(__name__)


class PretextLoss(nn.Module):
    """The criterion of a pretext model: the ``loss`` entry of the model's output dict."""

    def forward(self, y_pred, y_true=None):
        return y_pred["loss"]


class PretextSkill(Callback):
    """Record the pretext skill of every epoch: ``1 - loss / trivial_loss``.

    Reads the batch losses and the batch trivial losses (the loss of a predictor
    that learned nothing, on the same batch) and records ``train_trivial``,
    ``train_skill`` and, with a validation set, ``valid_trivial`` and
    ``valid_skill``, each weighted by batch size. 0 means the encoder learned
    nothing, 1 a perfect prediction.
    """

    def on_epoch_end(self, net, **kwargs):
        batches = net.history[-1, "batches"]
        for prefix in ("train", "valid"):
            rows = [b for b in batches if f"{prefix}_trivial" in b]
            if not rows:
                continue
            n = np.array([b[f"{prefix}_batch_size"] for b in rows], dtype=float)
            loss = float(np.dot(n, [b[f"{prefix}_loss"] for b in rows]) / n.sum())
            trivial = float(np.dot(n, [b[f"{prefix}_trivial"] for b in rows]) / n.sum())
            net.history.record(f"{prefix}_trivial", trivial)
            net.history.record(f"{prefix}_skill", pretext_skill(loss, trivial))


class _SamplerEpoch(Callback):
    """Give the distributed sampler the epoch number, so that every epoch reshuffles."""

    def on_epoch_begin(self, net, **kwargs):
        sampler = getattr(net, "train_sampler_", None)
        if sampler is not None:
            sampler.set_epoch(len(net.history))


class PretrainNet(PropagateInterrupt, NeuralNet):
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
    valid_fraction : float | None
        Share of the windows held out to measure the pretext loss and skill on data
        the model does not train on (a seeded split). Their crops and channels are
        drawn once (at most ``max_valid_windows`` of them) and the model's patches
        and masks come from a generator reseeded before every validation pass, so
        the validation numbers of different epochs are comparable. None or 0: no
        validation (``train_split`` may also be given directly).
    max_valid_windows : int
        At most this many validation windows are kept (drawn with a fixed seed).
    checkpoint_dir : str | Path | None
        If given, the encoder is saved there after every epoch
        (``encoder_last.pt``) and when the validation loss (or, without validation,
        the training loss) improves (``encoder_best.pt``), and so is the whole
        training state (:class:`StateCheckpoint`: parameters, optimizer, history),
        crash-safe, with the run's settings in ``config.json``. ``fit`` then resumes
        from that state if it exists: the history and the learning-rate curve
        continue, and only the remaining epochs run. A folder whose saved settings
        differ from this net's (model, pretext settings, learning rate, batch size,
        weight decay) is refused with an error that names the differences.
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
    The history records ``train_loss``, ``train_skill`` and, with validation,
    ``valid_loss`` and ``valid_skill`` every epoch (see :class:`PretextSkill`); the
    progress bar shows them. A module given as an instance is trained in place, as
    skorch does; pass ``copy.deepcopy(model)`` to keep the original.

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
        valid_fraction=None,
        max_valid_windows=2048,
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
        self.valid_fraction = valid_fraction
        self.max_valid_windows = max_valid_windows
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
            ("pretext_skill", PretextSkill()),
            ("lr_schedule", WarmupCosineLR(warmup_fraction=self.warmup_fraction)),
            ("sampler_epoch", _SamplerEpoch()),
        ]
        if distributed.rank() != 0:  # only rank 0 shows progress, logs and writes
            return callbacks
        if self.progress_bar:
            keys = ["train_loss", "train_skill", "valid_loss", "valid_skill"]
            callbacks.append(("progress_bar", ProgressBar(postfix_keys=keys)))
        if self.checkpoint_dir is not None:
            callbacks += [
                ("encoder_checkpoint", EncoderCheckpoint(self.checkpoint_dir)),
                ("state_checkpoint", StateCheckpoint(self.checkpoint_dir)),
            ]
        callbacks.append(("print_log", PrintLog(sink=logger.info)))
        return callbacks

    # -- validation on fixed draws ---------------------------------------------------------
    def get_split_datasets(self, X, y=None, **fit_params):
        """The training and validation sets; validation crops are drawn once, seeded."""
        if self.valid_fraction and self.train_split is None:
            check_range("valid_fraction", self.valid_fraction, 0, 1, high_open=True)
            split = ValidSplit(self.valid_fraction, stratified=False, random_state=0)
            dataset = self.get_dataset(X, y)
            dataset_train, dataset_valid = split(dataset, None)
        else:
            dataset_train, dataset_valid = super().get_split_datasets(X, y, **fit_params)
        if dataset_valid is not None and not getattr(self, "_valid_fixed", None):
            self._valid_fixed = self._fixed_draws(dataset_valid)
        if dataset_valid is not None:
            dataset_valid = self._valid_fixed
        return dataset_train, dataset_valid

    def _fixed_draws(self, dataset):
        """At most ``max_valid_windows`` items of ``dataset``, each drawn once, seeded."""
        check_int("max_valid_windows", self.max_valid_windows, 1)
        rng = np.random.default_rng(0)
        keep = np.arange(len(dataset))
        if len(keep) > self.max_valid_windows:
            keep = np.sort(rng.choice(keep, self.max_valid_windows, replace=False))
        base, indices = dataset, keep
        if isinstance(dataset, Subset):
            base, indices = dataset.dataset, np.asarray(dataset.indices)[keep]
        if isinstance(base, SingleChannelWindows):
            return base.fixed_draws(indices, seed=0)
        X = torch.stack([torch.as_tensor(base[int(i)][0]) for i in indices])
        return TensorDataset(X, torch.zeros(len(X)))

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """Every validation pass starts a generator with the same seed (the same draws)."""
        super().on_epoch_begin(net, dataset_train, dataset_valid, **kwargs)
        device = self.device if str(self.device).startswith("cuda") else "cpu"
        self.valid_generator_ = torch.Generator(device=device).manual_seed(0)

    def get_iterator(self, dataset, training=False):
        """Training batches come from a DistributedSampler when distributed."""
        if not (training and self.distributed_):
            return super().get_iterator(dataset, training=training)
        kwargs = self.get_params_for("iterator_train")
        kwargs.pop("shuffle", None)
        kwargs.setdefault("batch_size", self.batch_size)
        self.train_sampler_ = DistributedSampler(dataset, shuffle=True)
        return DataLoader(dataset, sampler=self.train_sampler_, **kwargs)

    def get_loss(self, y_pred, y_true=None, X=None, training=False):
        """The pretext loss; the trivial loss of the same batch is kept for the skill."""
        self.trivial_loss_ = y_pred["trivial_loss"].detach().float()
        return super().get_loss(y_pred, y_true, X=X, training=training)

    def validation_step(self, batch, **fit_params):
        """Evaluate with the validation generator: the same patches and masks every pass."""
        fit_params.setdefault("generator", getattr(self, "valid_generator_", None))
        step = super().validation_step(batch, **fit_params)
        self.history.record_batch("valid_trivial", self.trivial_loss_.item())
        return step

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

    def infer(self, x, **fit_params):
        """The module's forward pass, under bf16 autocast when ``amp`` is set."""
        device_type = torch.device(self.device).type
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bool(self.amp)):
            return super().infer(x, **fit_params)

    def train_step(self, batch, **fit_params):
        """One optimisation step; the recorded loss is the mean over processes."""
        step = super().train_step(batch, **fit_params)
        trivial = self.trivial_loss_
        if self.distributed_:
            step["loss"] = distributed.average_across_ranks(step["loss"])
            trivial = distributed.average_across_ranks(trivial)
        self.history.record_batch("train_trivial", trivial.item())
        self.history.record_batch("train_skill", pretext_skill(step["loss"].item(), trivial.item()))
        return step

    def run_config(self):
        """The settings a resumed run must share: model, pretext task, optimisation."""
        model = self.pretext_
        config = {"model": type(model).__name__}
        for name in _MODEL_SETTINGS:
            value = getattr(model, name, None)
            if isinstance(value, bool | int | float | str):
                config[name] = value
        for name in _ENCODER_SETTINGS:
            config[f"encoder.{name}"] = getattr(model.encoder, name)
        config["activation"] = type(model.encoder.blocks[0].ff[1]).__name__
        config.update(
            lr=self.lr,
            batch_size=self.batch_size,
            weight_decay=self.get_params_for("optimizer").get("weight_decay"),
            optimizer=getattr(self.optimizer, "__name__", str(self.optimizer)),
            warmup_fraction=self.warmup_fraction,
            valid_fraction=self.valid_fraction,
        )
        return config

    def _check_resume(self, folder):
        """Refuse to resume a run whose saved settings differ from this net's."""
        saved_file = Path(folder) / "config.json"
        config = json.loads(json.dumps(self.run_config()))
        if not saved_file.is_file():
            return config
        saved = json.loads(saved_file.read_text())
        diffs = [
            f"{key}: saved {saved.get(key)!r}, now {config.get(key)!r}"
            for key in sorted(set(saved) | set(config))
            if not _same(saved.get(key), config.get(key))
        ]
        if diffs:
            raise ValueError(
                f"'checkpoint_dir' {str(folder)!r} holds a run with other settings; resuming "
                "it would mix them. Differences: " + "; ".join(diffs) + ". Use another "
                "'checkpoint_dir', or the saved settings."
            )
        return config

    def fit(self, X, y=None, **fit_params):
        """Pretrain for ``max_epochs``, resuming from ``checkpoint_dir`` when it holds a run."""
        if not (self.warm_start and self.initialized_):
            self.initialize()
        self._valid_fixed = None
        done = 0
        if self.checkpoint_dir is not None:
            config = self._check_resume(self.checkpoint_dir)
            if StateCheckpoint.current(self.checkpoint_dir) is not None and not self.warm_start:
                done = StateCheckpoint.load(self, self.checkpoint_dir)
                logger.info(
                    "Resuming pretraining from %s after %d epochs.", self.checkpoint_dir, done
                )
            if distributed.rank() == 0:
                Path(self.checkpoint_dir).mkdir(parents=True, exist_ok=True)
                (Path(self.checkpoint_dir) / "config.json").write_text(json.dumps(config, indent=1))
        epochs = self.max_epochs - done
        if epochs > 0:
            self.partial_fit(X, y, epochs=epochs, **fit_params)
        return self


#: Settings of a pretext model that a resumed run must keep.
_MODEL_SETTINGS = (
    "n_times", "sfreq", "n_patches", "pos_mask_ratio", "sampling", "decoder_name",
    "decoder_impl", "mask_ratio", "loss_on", "label_sigma",
)  # fmt: skip
_ENCODER_SETTINGS = ("patch_seconds", "emb_dim", "depth", "n_heads", "ff_dim", "drop_prob", "eps")


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return a == b
