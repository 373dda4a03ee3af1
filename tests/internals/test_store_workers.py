"""The store's worker pool: ended at once, whatever its workers were doing."""

import os
import struct
import threading

from braindecode_pars.store import _workers as store_workers


def test_a_pool_whose_result_pipe_holds_half_a_message_still_ends():
    """A worker killed while it wrote its result leaves half a message in the pool's
    result pipe; the pool's manager thread then waits for the rest. Here the half message
    is written by hand (a length of 1,000 bytes, then 10 of them): ending the pool must
    still return, and quickly."""
    context = store_workers._worker_context(preload="braindecode_pars.store._build")
    pool = store_workers._pool(1, context, ())
    assert pool.submit(os.getpid).result(timeout=60) != os.getpid()  # a worker runs
    writer = pool._result_queue._writer
    os.write(writer.fileno(), struct.pack("!i", 1000) + b"x" * 10)
    ended = threading.Event()

    def end():
        store_workers._end_pool(pool)
        ended.set()

    threading.Thread(target=end, daemon=True).start()
    assert ended.wait(timeout=30), "the pool did not end: its manager waits on the pipe"
