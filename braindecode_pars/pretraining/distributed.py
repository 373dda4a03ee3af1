"""torch.distributed helpers: set-up and tear-down under torchrun, rank queries, the
log's reduction."""

from __future__ import annotations

import faulthandler
import logging
import os

import torch
import torch.distributed as dist

from braindecode_pars._jobs.signals import DUMP_AFTER_SECONDS, arm_stack_dump

logger = logging.getLogger(__name__)


def _is_distributed():
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank():
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if _is_distributed() else 0


def world_size():
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if _is_distributed() else 1


def init_distributed(device=None):
    """Join the process group that ``torchrun`` describes in the environment.

    Does nothing outside torchrun (``WORLD_SIZE`` unset or 1). Uses NCCL when the
    device is a GPU and gloo otherwise; on GPUs each process takes the GPU of its
    ``LOCAL_RANK``.

    Returns
    -------
    device : str
        The device this process should train on.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if world <= 1:
        return device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if str(device).startswith("cuda"):
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if str(device).startswith("cuda") else "gloo")
    logger.info("Process %d of %d on %s.", dist.get_rank(), world, device)
    return device


def close_distributed(finished=True):
    """Leave the process group that :func:`init_distributed` joined, as the last step of
    a process under torchrun.

    When the run ``finished`` on every process, they first wait for each other (a
    barrier), so that none tears down its connections while another still trains,
    saves or reduces: a gloo process that exited while its peer was still at work
    could abort at its own exit (``terminate called without an active exception``).
    When it did not (an error on one process), the group is destroyed at once, since a
    barrier would wait for a process that will never reach it. If the barrier or the
    tear-down has not ended within
    :data:`~braindecode_pars._jobs.signals.DUMP_AFTER_SECONDS`, every thread's stack is
    written to stderr. Does nothing outside an initialised process group.

    Parameters
    ----------
    finished : bool
        Whether every process reached this call after a run that ended normally (or was
        stopped by a signal on which they all agreed).

    Examples
    --------
    >>> close_distributed()  # outside torchrun: nothing to do
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    # a barrier or a tear-down that hangs writes every thread's stack before a
    # launcher's SIGKILL comes
    armed = arm_stack_dump(DUMP_AFTER_SECONDS)
    try:
        if finished and dist.get_world_size() > 1:
            dist.barrier()
        dist.destroy_process_group()
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()
    logger.debug("Left the process group.")


def _reduce_across_ranks(values, summed=None, maxed=None):
    """``values`` reduced over all processes: summed where ``summed`` (a bool tensor of
    their shape) is True, the largest where ``maxed`` is, averaged elsewhere (all
    averaged when both are None); one all-reduce, and a second for the largest.
    Returned detached; unchanged when not distributed."""
    if not _is_distributed():
        return values
    total = values.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    mean = total / dist.get_world_size()
    out = mean if summed is None else torch.where(summed, total, mean)
    if maxed is not None:
        largest = torch.where(maxed, values.detach(), -torch.inf)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        out = torch.where(maxed, largest, out)
    return out
