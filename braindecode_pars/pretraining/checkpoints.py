"""Crash-safe skorch checkpoints of a pretraining run: its whole state, and its encoder.

Saving, loading and exporting encoders live in :mod:`braindecode_pars.hub.folders`.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import shutil
import time
from pathlib import Path

import torch
from skorch.callbacks import Callback

from braindecode_pars._util.atomic import fsync_file, fsync_folder, write_atomic
from braindecode_pars.hub.folders import run_state, save_encoder
from braindecode_pars.hub.folders import unwrapped_state_dict as _unwrapped_state_dict
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.callbacks import _pair_tables, _restore_pair_tables

logger = logging.getLogger(__name__)


class _Cadence(Callback):
    """Writes at the end of the first epoch ``every_minutes`` after the last write, of the
    run's last epoch, and at the end of a training that stopped early (``on_train_end``
    after an interrupt); ``every_minutes=0``: every epoch. The net's log is read first
    (``read_log``); under DistributedDataParallel, where reading it is a collective
    that only rank 0 (which writes) would join, the write waits for the next epoch the
    net reports, whose log every process has read."""

    def on_train_begin(self, net, **kwargs):
        self.written_at_ = time.monotonic()
        self.written_epoch_ = len(net.history)

    def on_epoch_end(self, net, **kwargs):
        due = time.monotonic() - self.written_at_ >= 60.0 * (self.every_minutes or 0)
        if due and getattr(net, "distributed_", False):
            due = getattr(net, "reports_epoch_", True)
        if due or len(net.history) >= net.max_epochs:
            self._write_now(net)

    def on_train_end(self, net, **kwargs):
        # an epoch stopped within is not in the history (StopHandling drops it)
        if len(net.history) > getattr(self, "written_epoch_", len(net.history)):
            self._write_now(net)

    def _write_now(self, net):
        if not getattr(net, "distributed_", False) and hasattr(net, "read_log"):
            net.read_log()  # (distributed: read at this reported epoch, or the run's end)
        _check_finite(net)
        try:
            self.write(net)
        except (OSError, RuntimeError) as err:  # a full disk, a file-size limit (torch.save
            # raises a RuntimeError from its zip writer when a write comes up short)
            saved = run_state(self.dirname)
            kept = f"the last saved state ({saved.name}) stays" if saved else "no state is saved"
            reason = getattr(err, "strerror", None) or err
            raise CheckpointWriteError(
                getattr(err, "errno", None),
                f"Could not write the checkpoint of epoch {len(net.history)} in "
                f"'{self.dirname}' ({reason}): {kept}. Free space (or raise the limit) and "
                "fit again with this folder to resume.",
            ) from err
        self.written_at_ = time.monotonic()
        self.written_epoch_ = len(net.history)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a file-size limit); the last
    complete state is left as it was."""


class CheckpointReadError(RuntimeError):
    """A saved state cannot be read (a truncated or corrupt file)."""


def _check_finite(net):
    """Refuse to save a state that a non-finite step reached: the last epoch's training
    loss (read at this point) and every parameter must be finite. Asked only when a
    checkpoint is written (one read of the device then), never at a step.

    Raises
    ------
    FloatingPointError
        Naming the epoch and what is not finite; the last saved state stays.
    """
    row = net.history[-1] if len(net.history) else {}
    loss = row.get("train_loss")
    bad_loss = isinstance(loss, float) and not math.isfinite(loss)
    params = [p for p in net.pretext_.parameters() if p.is_floating_point()]
    finite = bool(torch.stack([torch.isfinite(p).all() for p in params]).all()) if params else True
    if bad_loss or not finite:
        what = f"training loss {loss}" if bad_loss else "weights"
        where = f"epoch {len(net.history)}"
        if getattr(net, "stopped_steps_", 0):
            where += f" (and {net.stopped_steps_} step(s) of the next)"
        raise FloatingPointError(
            f"Pretraining reached a non-finite {what} at {where}, so no checkpoint is "
            f"written: the last saved state in '{net.checkpoint_dir}' stays as it was. "
            "Check the data for NaN or infinite samples (a window store counts them), or "
            "lower the learning rate."
        )


#: The file of a state saved within an epoch that holds the values of that epoch's
#: steps done (its history row's batches, which the history of completed epochs lacks).
_EPOCH_BATCHES = "epoch_batches.json"


class StateCheckpoint(_Cadence):
    """Save the whole training state on a cadence and when training ends, crash-safe.

    Written at the end of the first epoch ``every_minutes`` after the last write, of the
    run's last epoch, and when training stops early (Ctrl-C, a :class:`TimeLimit`):
    the state then holds the weights reached and the epochs completed. Each
    state's parameters, optimizer state and history are written into a new
    folder ``<dirname>/state-<epoch>/``: ``params.pt`` holds the *unwrapped* pretext
    model's state dict (``net.pretext_``: no ``module.`` prefix of
    DistributedDataParallel, no ``_orig_mod.`` of ``torch.compile``), and
    ``optimizer.pt`` and ``history.json`` are skorch's (``net.save_params``; the
    optimizer's state is keyed by parameter order, which no wrapper changes). Then the
    pointer file ``<dirname>/state.json`` is replaced atomically
    (:func:`~braindecode_pars._util.atomic.write_atomic`) to name it, with the
    epoch, the steps done of the next epoch when a stop signal ended the run within one
    (``steps``, and ``steps_per_epoch``; the folder is then ``state-<epoch>-<steps>``
    and holds the values of those steps, ``epoch_batches.json``, which the resumed
    epoch's row starts with),
    the run's seed (``seed``, from which every order, crop and draw of the run derives,
    by the epoch and the step: a run resumed from any step goes on as the run never
    stopped, see :func:`~braindecode_pars._util.seeding.derived_seed`), the
    run's epoch budget, how it was launched (processes, compile, amp, torch's CPU
    threads: ``threads``, rank 0's, whose count a CPU's results depend on) and, for
    PARS, whether its pair decoder had moved to float64 factor tables
    (``pair_tables``, with the count of reports in a row that had unresolved pairs:
    see :class:`~braindecode_pars.pretraining.callbacks.PretextSkill`), and older state
    folders are removed (the files and the folder are flushed to the
    disk before the pointer names them, and the pointer before an old state goes). A
    run killed at any moment therefore keeps one complete, consistent state, which
    :meth:`load` reads back whatever the number of processes or the ``compile`` and
    ``amp`` settings of the resumed run (and a run moved to float64 tables goes on in
    float64).
    ``<dirname>/config.json`` (written by
    :class:`~braindecode_pars.pretraining.PretrainNet`) records the settings of the run;
    a finished run also has ``encoder.pt`` (see :func:`~braindecode_pars.pretraining.net`).

    Parameters
    ----------
    dirname : str | Path
        Folder of the state.
    every_minutes : float
        Minutes between writes during training (0: every epoch).
    """

    def __init__(self, dirname, every_minutes=0.0):
        self.dirname = dirname
        self.every_minutes = every_minutes

    def on_train_end(self, net, **kwargs):
        # also a stop within an epoch (a stop signal): its steps are saved with the state
        if getattr(net, "stopped_steps_", 0):
            self._write_now(net)
            return
        super().on_train_end(net, **kwargs)

    @staticmethod
    def current(dirname):
        """The folder of the last complete state under ``dirname``, or None."""
        return run_state(dirname)

    def write(self, net):
        """Write the state of ``net`` now."""
        root = Path(self.dirname)
        steps = int(getattr(net, "stopped_steps_", 0) or 0)
        name = f"state-{len(net.history):06d}" + (f"-{steps:06d}" if steps else "")
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(
            {k: v.detach().cpu() for k, v in net.pretext_.state_dict().items()},
            folder / "params.pt",
        )
        net.save_params(f_optimizer=folder / "optimizer.pt", f_history=folder / "history.json")
        files = ["params.pt", "optimizer.pt", "history.json"]
        batches = getattr(net, "stopped_batches_", None) if steps else None
        if batches is not None and len(batches) == steps:  # the stopped epoch's steps
            (folder / _EPOCH_BATCHES).write_text(json.dumps(batches))
            files.append(_EPOCH_BATCHES)
        # on the disk, the files and the folder's entries, before the pointer names them
        for file in files:
            fsync_file(folder / file)
        fsync_folder(folder)
        pointer = {
            "state": name,
            "epoch": len(net.history),
            "steps": steps,
            "steps_per_epoch": int(getattr(net, "epoch_steps_", 0) or 0),
            "max_epochs": int(net.max_epochs),
            "world_size": distributed.world_size() if net.distributed_ else 1,
            "compile": bool(getattr(net, "compile", False)),
            "amp": bool(getattr(net, "amp", False)),
            "threads": torch.get_num_threads(),  # a CPU's sums differ with the count
            # a store read in the order of the disk hands its batches over by worker
            "workers": int(net.get_params_for("iterator_train").get("num_workers", 0) or 0),
            "seed": getattr(net, "run_seed_", None),  # every draw of the run derives from it
            **_pair_tables(net),  # PARS: the float64 escalation of its pair decoder
        }
        write_atomic(root / "state.json", json.dumps(pointer))
        for old in root.glob("state-*"):
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, net, dirname):
        """Load the last complete state under ``dirname`` into ``net``; its epoch count.

        Parameters saved with the prefixes of DistributedDataParallel or
        ``torch.compile`` (by earlier versions) load too.
        """
        folder = cls.current(dirname)
        if folder is None:
            return 0
        try:
            params = torch.load(folder / "params.pt", map_location="cpu", weights_only=True)
            net.pretext_.load_state_dict(_unwrapped_state_dict(params))
            net.load_params(f_optimizer=folder / "optimizer.pt", f_history=folder / "history.json")
        except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError) as err:
            raise CheckpointReadError(
                f"The saved state '{folder}' cannot be read ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else 'no detail'}): a file of it is "
                "truncated or corrupt. Restore the folder from a copy, or remove "
                f"'{Path(dirname) / 'state.json'}' and its state-* folders to start the run "
                "again."
            ) from err
        pointer = json.loads((Path(dirname) / "state.json").read_text())
        net.resume_point_ = (int(pointer.get("steps", 0)), int(pointer.get("steps_per_epoch", 0)))
        batches = folder / _EPOCH_BATCHES
        net.resumed_batches_ = (
            json.loads(batches.read_text()) if net.resume_point_[0] and batches.is_file() else None
        )
        net.run_seed_ = pointer.get("seed")
        if net.run_seed_ is None:
            logger.info(
                "The state in %s holds no run seed (saved by an earlier version): the run "
                "continues from it, but with new crops, orders and draws, so not bit for bit "
                "as the run never stopped would have.",
                folder,
            )
        _restore_pair_tables(net, pointer)
        return len(net.history)


class EncoderCheckpoint(_Cadence):
    """Save the pretext model's encoder on a cadence (last) and when it improves (best).

    ``encoder_last.pt`` is written as :class:`StateCheckpoint` writes the state;
    ``encoder_best.pt`` at the end of every epoch whose monitored value improved.

    Writes ``<dirname>/encoder_last.pt`` and ``<dirname>/encoder_best.pt`` with
    :func:`~braindecode_pars.hub.folders.save_encoder`; load them with
    :func:`~braindecode_pars.hub.folders.load_encoder`.

    Parameters
    ----------
    dirname : str | Path
        Folder of the files.
    monitor : str
        History key that is True on an epoch that improved; ``valid_loss_best`` is
        used instead of the default when a validation set exists. Only the epochs the
        net reports (validates) are compared.
    every_minutes : float
        Minutes between writes of ``encoder_last.pt`` during training (0: every epoch).
    """

    def __init__(self, dirname, monitor="train_loss_best", every_minutes=0.0):
        self.dirname = dirname
        self.monitor = monitor
        self.every_minutes = every_minutes

    @staticmethod
    def _info(row):
        return {"epoch": int(row["epoch"]), "train_loss": float(row.get("train_loss", "nan"))}

    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        if getattr(net, "reports_epoch_", True):
            monitor = "valid_loss_best" if "valid_loss" in row else self.monitor
            if row.get(monitor, False):
                save_encoder(net.encoder, Path(self.dirname) / "encoder_best.pt", **self._info(row))
        super().on_epoch_end(net, **kwargs)

    def write(self, net):
        """Write ``encoder_last.pt`` now."""
        row = net.history[-1]
        save_encoder(net.encoder, Path(self.dirname) / "encoder_last.pt", **self._info(row))
