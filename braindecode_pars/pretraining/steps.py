"""The training steps of :class:`~braindecode_pars.pretraining.PretrainNet`, which never wait
for the device.

skorch reads every batch's loss with ``.item()``, copies each batch and its targets to
the device and waits for the copies; on a GPU each of these makes the host wait until
the step has run, so that it cannot queue the next one. :class:`_AsyncSteps` (a mixin of
the net) copies the batch with ``non_blocking`` and leaves the targets, which a pretext
task does not read, where they are; it keeps each batch's loss in the history as a copy
of its device tensor (and :class:`~braindecode_pars.pretraining.callbacks.PretextSkill` the trivial
loss), and :meth:`_AsyncSteps.read_log` reads them all at once on the report cadence
(:class:`_ReadLog`): one transfer, and under DistributedDataParallel one all-reduce
that averages them over the processes (and sums the counts, :data:`_LOG_COUNTS`).
Under CUDA graphs (``compile__mode`` "reduce-overhead" or "max-autotune") it marks a
step boundary before every step and gives Adam and AdamW their learning rate as a tensor
on the device (updated in place by the schedule, so that an optimiser step captured by
a CUDA graph would read the rate of the step it replays; ``capturable`` where not
fused). The gradients are set to None between steps (``zero_grad(set_to_none=True)``),
never zeroed in place: the first backward's gradients are the compiled backward's
outputs, which live in the CUDA graphs' memory pool, and a gradient kept from one step
to the next is freed when the next step's forward starts a new generation of graphs;
the next backward, adding into it, fails with "accessing tensor output of CUDAGraphs
that has been overwritten by a subsequent run".
"""

from __future__ import annotations

import numpy as np
import torch
from skorch.callbacks import Callback
from skorch.dataset import get_len
from skorch.history import History

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.optim import FUSED_OPTIMIZERS
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.config import _CUDA_GRAPH_MODES, COMPILE_MODES

#: Ends of the names of the log's values that count something (the pairs a pair decoder
#: could not compute exactly, ``unresolved_pairs``): under DistributedDataParallel,
#: :meth:`_AsyncSteps.read_log` sums them over the processes; it averages the others.
_LOG_COUNTS = ("unresolved_pairs",)

#: The logged values that are the largest over the processes under
#: DistributedDataParallel (the pair decoder's largest logit gap).
_LOG_MAXIMA = ("pair_gap",)


def _kept(value, copy=True):
    """A logged value as the log keeps it until it is read: a detached float tensor on its
    device, copied where ``copy`` (under CUDA graphs, whose output memory the next replay
    rewrites); otherwise the step's own output, which no later step writes."""
    value = value.detach().float()
    return value.clone() if copy else value


class _RunHistory(History):
    """skorch's ``History``, whose rows looked up by epoch number (``history[-1]``: every
    ``new_batch`` and ``record_batch`` of every step, and the log read at each report)
    are indexed as in a list; skorch's first copies the whole list of epochs
    (``to_list``), a cost that grows, step after step, with the epochs held. Any other
    index (a column, a slice, the batches) is skorch's."""

    def __getitem__(self, i):
        if type(i) is int:
            return list.__getitem__(self, i)
        return super().__getitem__(i)


def _run_history(history):
    """``history`` as a :class:`_RunHistory` when it is skorch's plain ``History`` (the
    same object: the class adds no state), else as it is."""
    if type(history) is History:
        history.__class__ = _RunHistory
    return history


def _in_mode(module, training):
    """Whether every module of ``module``'s tree is in mode ``training`` and has the
    ``train`` of ``torch.nn.Module``, so that ``module.train(training)`` would change
    nothing."""
    return all(
        m.training == training and type(m).train is torch.nn.Module.train for m in module.modules()
    )


class _ReadLog(Callback):
    """The pretraining net's log read at its report cadence: at the end of every epoch
    the net reports (``reports_epoch_``) and at the end of training, before the other
    callbacks look at the history (it comes first); see :meth:`_AsyncSteps.read_log`."""

    def on_train_begin(self, net, **kwargs):
        net.start_log()

    def on_epoch_end(self, net, **kwargs):
        net.end_epoch_log()
        if getattr(net, "reports_epoch_", True) or len(net.history) >= net.max_epochs:
            net.read_log()

    def on_train_end(self, net, **kwargs):
        net.read_log()


class _AsyncSteps:
    """Mixin of a skorch ``NeuralNet`` whose steps never wait for the device (see the
    module's docstring); it reads ``amp`` and ``reports_epoch_`` of the net."""

    def initialize_history(self):
        """skorch's, with a :class:`_RunHistory`."""
        super().initialize_history()
        _run_history(self.history_)
        return self

    @property
    def history(self):
        return self.history_

    @history.setter
    def history(self, value):  # a history loaded from a checkpoint's file, too
        self.history_ = _run_history(value)

    def _check_compile_mode(self):
        """``compile__mode``, checked; whether the steps replay as CUDA graphs."""
        mode = self.get_params_for("compile").get("mode")
        check_option("compile__mode", mode, COMPILE_MODES)
        self.cuda_graphs_ = bool(self.compile) and mode in _CUDA_GRAPH_MODES

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """skorch's, without waiting for the device at any step; the validation pass only
        on the epochs the cadence reports.

        The loss of each batch goes into the history as a copy of its device tensor
        (skorch reads it with ``.item()``, which waits for the step to finish); the net
        reads every such value at once at its report cadence (:meth:`read_log`). A
        training epoch resumed after a stop within it runs the steps it had left
        (``epoch_steps_ - epoch_step_offset_``), and before every step (an epoch's first
        too: an epoch of one step has no boundary within it) the net may stop
        (``_stop_between_steps``).
        """
        if iterator is None or (not training and not getattr(self, "reports_epoch_", True)):
            return
        batch_count = 0
        per_epoch = getattr(self, "epoch_steps_", None) if training else None
        left = per_epoch - getattr(self, "epoch_step_offset_", 0) if per_epoch else None
        stop = getattr(self, "_stop_between_steps", None)
        # the log copies a step's outputs under CUDA graphs: the next replay rewrites them
        copy = getattr(self, "cuda_graphs_", False)
        for batch in iterator:
            if training and batch_count and left is not None and batch_count >= left:
                break  # a resumed epoch's rest is done
            if training and stop is not None:  # a step boundary, an epoch's first included
                stop(batch_count)
            self.notify("on_batch_begin", batch=batch, training=training)
            if training and hasattr(self, "_seed_step"):  # the step's draws: its own seed
                self._seed_step(getattr(self, "epoch_step_offset_", 0) + batch_count)
            step = step_fn(batch, **fit_params)
            self.history.record_batch(prefix + "_loss", _kept(step["loss"], copy))
            X = batch[0] if isinstance(batch, tuple | list) else batch
            size = X.shape[0] if isinstance(X, torch.Tensor) else get_len(X)
            self.history.record_batch(prefix + "_batch_size", size)
            self.notify("on_batch_end", batch=batch, training=training, **step)
            batch_count += 1
        restored = getattr(self, "epoch_restored_steps_", 0) if training else 0
        self.history.record(prefix + "_batch_count", batch_count + restored)

    def notify(self, method_name, **cb_kwargs):
        """skorch's, without the calls to callbacks whose ``method_name`` is skorch's
        ``Callback``'s, which does nothing (most callbacks have no ``on_batch_begin``
        nor ``on_grad_computed``): a step notifies three times, and each notification
        calls only the callbacks that act on it. Which callbacks act on a method is
        found again when training begins and whenever the callbacks change."""
        getattr(self, method_name)(self, **cb_kwargs)
        for cb in self._acting(method_name):
            getattr(cb, method_name)(self, **cb_kwargs)

    def _acting(self, method_name):
        """The callbacks (in their order) whose ``method_name`` is not the base
        ``Callback``'s no-op."""
        callbacks = self.callbacks_
        cache = self.__dict__.get("_acting_")  # (the list, its length, method -> callbacks)
        if (
            cache is None
            or cache[0] is not callbacks  # held, so that a new list cannot take its id
            or cache[1] != len(callbacks)
            or method_name == "on_train_begin"
        ):
            cache = self._acting_ = (callbacks, len(callbacks), {})
        acting = cache[2].get(method_name)
        if acting is None:
            base = getattr(Callback, method_name, None)
            acting = cache[2][method_name] = [
                cb
                for _, cb in callbacks
                if base is None or getattr(getattr(cb, method_name), "__func__", None) is not base
            ]
        return acting

    # -- the log, read on the report cadence ----------------------------------------------
    def start_log(self):
        """Before training: every epoch in the history so far is read, and the best losses
        are those of its rows (a resumed run continues them)."""
        self.log_read_ = self.log_ended_ = len(self.history)
        self.log_best_ = {}
        for row in self.history:
            for prefix in ("train", "valid"):
                value = row.get(f"{prefix}_loss")
                if value is not None and value < self.log_best_.get(prefix, np.inf):
                    self.log_best_[prefix] = value

    def end_epoch_log(self):
        """The epoch just ended is whole: :meth:`read_log` fills its row when it reads."""
        self.log_ended_ = len(self.history)

    def read_log(self, reduce=True):
        """Read every value the history holds as a device tensor, in one transfer, and fill
        the rows of the epochs ended since the last read.

        A training step records its loss (and
        :class:`~braindecode_pars.pretraining.callbacks.PretextSkill` its trivial loss) as a device
        tensor, so that no step waits for the device; this reads them all with one
        ``tolist()``, under DistributedDataParallel after one all-reduce that averages
        the losses over the processes and sums the counts (:data:`_LOG_COUNTS`), so that
        every process keeps the same history. Then each
        ended epoch's row gets ``train_loss`` and ``valid_loss`` (means weighted by batch
        size, as skorch's ``PassthroughScoring``), their ``_best`` flags, and what the
        callbacks with an ``on_epoch_read(net, row)`` method record
        (:meth:`~braindecode_pars.pretraining.callbacks.PretextSkill.on_epoch_read`). The
        net calls it
        at the end of every reported epoch (``eval_every_steps``), at the end of
        training, and before a checkpoint is written; every process must call it at the
        same points.

        Parameters
        ----------
        reduce : bool
            Reduce over the processes under DistributedDataParallel (False: this
            process's values, for a training that stopped on one process only).
        """
        start = getattr(self, "log_read_", None)
        if start is None:
            self.start_log()
            start = self.log_read_
        places, values = [], []
        for i in range(start, len(self.history)):
            row = self.history[i]
            for where in [*row.get("batches", []), row]:
                for key, value in where.items():
                    if isinstance(value, torch.Tensor):
                        places.append((where, key))
                        values.append(value.detach().reshape(()).float())
        if values:
            device = values[0].device
            flat = torch.stack([v.to(device, non_blocking=True) for v in values])
            if reduce and self.distributed_:
                counts = [key.endswith(_LOG_COUNTS) for _, key in places]
                maxima = [key.endswith(_LOG_MAXIMA) for _, key in places]
                summed = torch.tensor(counts, device=device)
                maxed = torch.tensor(maxima, device=device) if any(maxima) else None
                flat = distributed._reduce_across_ranks(flat, summed, maxed)
            for (where, key), value in zip(places, flat.tolist(), strict=True):
                where[key] = value
        ended = min(getattr(self, "log_ended_", start), len(self.history))
        for i in range(start, ended):
            self._fill_epoch(self.history[i])
        self.log_read_ = max(start, ended)

    def _fill_epoch(self, row):
        """An ended epoch's losses, their ``_best`` flags, and the callbacks' values."""
        for prefix in ("train", "valid"):
            rows = [b for b in row.get("batches", []) if f"{prefix}_loss" in b]
            if not rows:
                continue
            n = np.array([b[f"{prefix}_batch_size"] for b in rows], dtype=float)
            loss = float(np.dot(n, [b[f"{prefix}_loss"] for b in rows]) / n.sum())
            best = loss < self.log_best_.get(prefix, np.inf)
            if best:
                self.log_best_[prefix] = loss
            row[f"{prefix}_loss"], row[f"{prefix}_loss_best"] = loss, bool(best)
        for _, callback in getattr(self, "callbacks_", []):
            if hasattr(callback, "on_epoch_read"):
                callback.on_epoch_read(self, row)

    def infer(self, x, **fit_params):
        """The module's forward pass, under bf16 autocast when ``amp`` is set; the batch
        is copied to the device without waiting (``non_blocking``: from the pinned
        memory of the training batches, the copy overlaps the work queued before it)."""
        if isinstance(x, torch.Tensor):
            x = x.to(self.device, non_blocking=True)
        device_type = torch.device(self.device).type
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bool(self.amp)):
            return super().infer(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """The criterion's loss; the targets, which a pretext task does not read, are not
        copied to the device (skorch's copy would wait for it)."""
        return self.criterion_(y_pred, y_true)

    def torch_compile(self, module, name):
        """skorch's ``torch.compile`` (``compile=True``, its arguments ``compile__*``) of
        the pretext model alone (the criterion only reads its output)."""
        if name != "module":
            return module
        return super().torch_compile(module, name)

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's; under CUDA graphs, Adam's and AdamW's learning rate as a 0-d tensor
        on the net's device (``capturable=True`` unless fused), which
        :class:`~braindecode_pars.pretraining.schedule.WarmupCosineLR` updates in place:
        float32 on CUDA (what its fused and capturable kernels read), float64 elsewhere
        (a float's value, so that the steps are those of a float rate; a float32 rate
        moves Adam's steps of parameters whose gradients are about 0, such as a key's
        bias, by its rounding)."""
        args, kwargs = super().get_params_for_optimizer(prefix, named_parameters)
        if getattr(self, "cuda_graphs_", False) and self.optimizer in FUSED_OPTIMIZERS:
            device = torch.device(self.device if self.device else "cpu")
            dtype = torch.float32 if device.type == "cuda" else torch.float64
            lr = kwargs.get("lr", self.lr)
            kwargs["lr"] = torch.tensor(float(lr), dtype=dtype, device=device)
            if not kwargs.get("fused"):
                kwargs["capturable"] = True
        return args, kwargs

    def _set_training(self, training=True):
        """skorch's (every module and criterion put in training or evaluation mode),
        without the walk of a module tree that is in that mode already: ``train(mode)``
        sets ``training`` on every module of the tree at every step, a tenth of a
        millisecond on a small model. A tree with a module whose class has its own
        ``train`` (DistributedDataParallel, a user's) is always walked."""
        for name in self._modules + self._criteria:
            module = getattr(self, name + "_")
            if isinstance(module, torch.nn.Module) and not _in_mode(module, training):
                module.train(training)

    def _zero_grad_optimizer(self, set_to_none=None):
        """skorch's; under CUDA graphs the gradients are set to None, never zeroed in
        place: a gradient kept into the next step is a tensor of the graphs' memory pool
        (the first backward's output, which autograd takes as ``.grad``), freed when the
        next step's forward starts a new generation of graphs, and the backward that
        adds into it fails (see the module's docstring)."""
        if getattr(self, "cuda_graphs_", False):
            set_to_none = True
        super()._zero_grad_optimizer(set_to_none=set_to_none)

    def _mark_step(self):
        """Under CUDA graphs (``compile__mode`` "reduce-overhead" or "max-autotune"), a new
        step begins: the graphs' earlier outputs may be overwritten (the log keeps copies)."""
        if getattr(self, "cuda_graphs_", False):
            torch.compiler.cudagraph_mark_step_begin()

    def train_step(self, batch, **fit_params):
        """One optimisation step (a CUDA-graph step boundary marked first); its loss is
        averaged over the processes when the log is read (:meth:`read_log`)."""
        self._mark_step()
        return super().train_step(batch, **fit_params)
