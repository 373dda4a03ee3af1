"""Training batches read ahead by a thread and copied to the device on a side stream.

When a view's crops are drawn on the host (DataLoader workers are not used and the
recordings are not on the device: :class:`~braindecode_pars.pretraining._views._DeviceCrops`),
the draw of batch ``i + 1`` and its copy to a GPU would otherwise wait for step ``i``
in the training process and the copy would queue on the compute stream behind it.
:class:`_Prefetched` draws the next batches in one thread (into pinned memory, as the
DataLoader it reads already does on CUDA), and on CUDA copies each to the device on a
stream of its own, so that a step finds its batch there; the step's stream waits for
that copy's event and no longer.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading

import torch

logger = logging.getLogger(__name__)

_END = object()

#: Seconds a pass that ends waits for its reader before a warning says it still waits
#: (it waits until the reader ends: never two readers at once).
JOIN_WARN_SECONDS = 10.0


class _Prefetched:
    """The batches of ``loader``, read ``depth`` ahead by one thread; on a CUDA
    ``device`` each copied there on a side stream before it is handed out.

    The batches and their order are the loader's: the thread is the only reader.
    ``prepare`` (called in the training thread before the reader starts) makes the
    view's generator there; the loader's own seeds (its sampler's) are drawn from
    torch's global generator by the reader while the training thread waits for the
    first batch, so the order of the draws is fixed. ``take`` (read when a pass starts:
    None, all) is the number of batches the pass will use: the reader draws no more, so
    that an epoch left early by design (the rest of a resumed epoch) draws what the
    loader alone would have drawn and the next epochs draw the same crops. A batch's
    error is raised in the training thread; leaving the loop early (a stop at a step
    boundary) ends the thread, and the pass waits for it to end (a warning after
    :data:`JOIN_WARN_SECONDS` says a read holds it up), so that the next pass's reader
    never runs beside it.
    """

    def __init__(self, loader, device, depth=2, prepare=None, take=None):
        self.loader, self.device, self.depth, self.prepare = loader, device, depth, prepare
        self.take = take

    def __len__(self):
        return len(self.loader)

    def __getattr__(self, name):  # the loader's own attributes (its sampler, dataset...)
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self):
        device = torch.device(self.device)
        stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        if self.prepare is not None:
            self.prepare()
        take = self.take() if self.take is not None else None
        ready, stop = queue.Queue(maxsize=self.depth), threading.Event()

        def put(item):
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.05)
                    return
                except queue.Full:
                    continue

        def read():
            try:
                for X, y in itertools.islice(self.loader, take):
                    event = None
                    if stream is not None:
                        with torch.cuda.stream(stream):
                            X = X.to(device, non_blocking=True)
                            y = y.to(device, non_blocking=True)
                            event = torch.cuda.Event()
                            event.record(stream)
                    put((X, y, event))
                    if stop.is_set():
                        return
            except BaseException as error:  # raised in the training thread
                put(error)
            finally:
                put(_END)

        thread = threading.Thread(target=read, name="braindecode-pars-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                X, y, event = item
                if event is not None:
                    current = torch.cuda.current_stream(device)
                    current.wait_event(event)
                    X.record_stream(current)  # memory of the side stream, used here
                    y.record_stream(current)
                yield X, y
        finally:
            stop.set()
            # the reader looks at `stop` after every batch: wait for it to end (a reader
            # left inside a slow read would run beside the next pass's, on the same
            # generator), saying so when a read holds it up
            thread.join(timeout=JOIN_WARN_SECONDS)
            if thread.is_alive():
                logger.warning(
                    "The read-ahead thread is still inside a batch read %.0f s after the "
                    "training loop left it; waiting for that read to end.",
                    JOIN_WARN_SECONDS,
                )
                thread.join()
