"""Randomness that stays inside a fit: seeded generators, global state left as found, and
the draws of a pretraining run, each a function of its seed and its place in the run."""

from __future__ import annotations

import contextlib
import numbers

import numpy as np
import torch

from braindecode_pars._util.checks import check_none_or_number


def fit_seed(random_state):
    """The seed of one fit: ``random_state``, or fresh entropy from the operating
    system when it is None (numpy's global generator is not touched)."""
    if check_none_or_number("random_state", random_state, numbers.Integral, "an int and None"):
        return int(random_state)
    return int(np.random.SeedSequence().generate_state(1)[0])


@contextlib.contextmanager
def isolated_random_state(seed, device="cpu"):
    """Seed torch's generators with ``seed`` inside the block, and give torch's and
    numpy's global generators back as they were when it ends (also on error).

    Model initialisation, dropout, batch shuffling and the random draws of the
    pretext models and crops inside the block all come from torch's generator,
    seeded here; what the caller's code drew before and draws after is unchanged.
    A CUDA ``device`` on a machine without CUDA forks the CPU generator alone (the
    caller's own device check gives the error).
    """
    device = torch.device(device or "cpu")
    devices = []
    if device.type == "cuda" and torch.cuda.is_available():
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    numpy_state = np.random.get_state()  # noqa: NPY002 (the legacy global is what we keep)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)  # noqa: NPY002


#: What a seed derived from a run's seed draws (:func:`derived_seed`'s first key after the
#: run's seed): the model's draws of a training step (torch's global generators), the
#: crops and channels of a batch, the order of an epoch's windows.
STEP, CROPS, ORDER = 0, 1, 2

#: Run seeds lie in ``[0, RUN_SEED_RANGE)`` (a ``DistributedSampler`` adds the epoch).
RUN_SEED_RANGE = 2**62


def seed_torch_generators(seed):
    """``torch.manual_seed(seed)`` for the generators that can draw: the CPU's, and those
    of each accelerator backend (CUDA, XPU, MTIA) already initialised, and MPS's.

    ``torch.manual_seed`` also queues a lazy seed for every backend not initialised yet,
    formatting a stack trace for each (three per call on a CPU-only machine, each a
    walk of the stack with a stat of every file in it); a training step seeded from its
    place in the run draws nothing there. The draws that follow are those of
    ``torch.manual_seed(seed)``, bit for bit, and ``torch.initial_seed()`` returns ``seed``.
    """
    seed = int(seed)
    torch.default_generator.manual_seed(seed)
    for name in ("cuda", "xpu", "mtia"):
        backend = getattr(torch, name, None)
        initialised = getattr(backend, "is_initialized", None)
        if initialised is not None and initialised():
            backend.manual_seed_all(seed)  # at once: no lazy seed, no stack formatted
    torch.mps.manual_seed(seed)  # returns at once where torch has no MPS


def derived_seed(*key):
    """A seed in ``[0, 2**63)`` that is a function of ``key`` (integers >= 0) alone, by
    numpy's ``SeedSequence``: nearby keys give unrelated seeds.

    A pretraining run's draws are each seeded so, from the run's seed, what they draw
    (:data:`STEP`, :data:`CROPS`, :data:`ORDER`), the process's rank, the epoch and the
    step or batch, and never from a generator's running state: a run stopped at any
    step and resumed makes the draws the same run never stopped makes, whatever
    process, thread or DataLoader worker makes them.

    Examples
    --------
    >>> derived_seed(7, STEP, 0, 3, 12) == derived_seed(7, STEP, 0, 3, 12)
    True
    >>> derived_seed(7, STEP, 0, 3, 12) == derived_seed(7, STEP, 0, 3, 13)
    False
    """
    state = np.random.SeedSequence([int(k) for k in key]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) | (int(state[1]) >> 1)


class _Batch:
    """A batch of window ``indices`` with the seed its crops and channels are drawn from
    (:meth:`~braindecode_pars.pretraining.SingleChannelWindows.batch`): what a
    DataLoader hands its dataset (or a worker) for one batch, so that the draws are the
    batch's whoever makes them."""

    __slots__ = ("indices", "seed")

    def __init__(self, indices, seed):
        self.indices, self.seed = indices, int(seed)

    def __getstate__(self):
        return self.indices, self.seed

    def __setstate__(self, state):
        self.indices, self.seed = state

    def __len__(self):
        return len(self.indices)


class _EpochOrder(torch.utils.data.Sampler):
    """The windows of one process's epoch, in an order that is a function of the run's
    seed, the epoch and the rank (set with :meth:`set_epoch`, as a
    ``DistributedSampler``'s): a permutation of ``range(n)`` (``shuffle``), ``range(n)``
    as it is, or ``draws`` windows drawn with replacement (an epoch of one batch of a
    process with fewer windows than a batch)."""

    def __init__(self, n, seed, shuffle=True, draws=None, rank=0):
        self.n, self.seed, self.shuffle, self.draws, self.rank = n, seed, shuffle, draws, rank
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return self.n if self.draws is None else self.draws

    def __iter__(self):
        if not self.shuffle and self.draws is None:
            return iter(range(self.n))
        g = torch.Generator().manual_seed(derived_seed(self.seed, ORDER, self.rank, self.epoch))
        if self.draws is not None:
            return iter(torch.randint(0, self.n, (self.draws,), generator=g).tolist())
        return iter(torch.randperm(self.n, generator=g).tolist())


class _EpochBatches(torch.utils.data.Sampler):
    """The full batches of an epoch of ``order`` (a sampler with ``set_epoch``), from
    batch ``start`` on (the rest of an epoch a stopped sitting had begun: the batches
    before it are skipped, not drawn). With ``keyed``, each batch is a :class:`_Batch`
    whose seed is a function of the run's ``seed``, the ``rank``, the epoch and the
    batch's place in the epoch."""

    def __init__(self, order, batch_size, seed, rank=0, keyed=False):
        self.order, self.batch_size, self.seed, self.rank = order, batch_size, seed, rank
        self.keyed = keyed
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)
        self.order.set_epoch(epoch)

    def __len__(self):
        return max(len(self.order) // self.batch_size - self.start, 0)

    def __iter__(self):
        # a BatchSampler's batches (consecutive runs of the order, the short last one
        # dropped), the ones before ``start`` skipped, not built
        order, size = list(self.order), self.batch_size
        for place in range(self.start, len(order) // size):
            batch = order[place * size : (place + 1) * size]
            if self.keyed:
                key = (self.seed, CROPS, self.rank, self.epoch, place)
                batch = _Batch(np.asarray(batch, dtype=np.int64), derived_seed(*key))
            yield batch
