"""Overlapped mini-batch pipeline: sample and fetch batch i+1 while batch i trains.

A background thread runs the data stages (sampling, feature fetch: collectives on their own
process group, so they never interleave with DDP's gradient all-reduce on the default group)
and hands finished batches to the training loop through a bounded queue. The batches are the
same as the sequential loop's (sampling is keyed by epoch and step, not by timing), so the
losses and final weights are too.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Iterator

from gnnscale.errors import PeerError

_DONE = object()


class Prefetcher:
    """Iterate ``produce(step)`` for ``step in range(steps)``, computed ahead in a thread.

    Args:
        produce: builds step ``i``'s batch (may issue collectives on its own group).
        steps: number of batches.
        depth: how many finished batches may wait in the queue (>= 1).
        timeout: the longest the consumer waits for one batch, in seconds (None: no bound);
            past it a :class:`PeerError` says which phase the thread is stuck in.
        describe: returns the thread's current phase, for that error (e.g. Health.phase).
        on_exit: called in the thread when it ends (e.g. Health.leave).

    Attributes (after iteration): ``wait_seconds``: time the consumer waited for a batch.
    An exception in ``produce`` is re-raised in the consumer.
    """

    def __init__(
        self, produce: Callable[[int], Any], steps: int, depth: int = 2, timeout: float | None = None,
        describe: Callable[[], str] | None = None, on_exit: Callable[[], None] | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"pipeline depth must be >= 1, found {depth}")
        self.produce = produce
        self.steps = steps
        self.timeout = timeout
        self.describe = describe
        self.on_exit = on_exit
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.wait_seconds = 0.0
        self.thread = threading.Thread(target=self._run, name="gnnscale-prefetch", daemon=True)

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for step in range(self.steps):
                if self.stop.is_set() or not self._put(("ok", self.produce(step))):
                    return
            self._put(("ok", _DONE))
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            self._put(("error", err))
        finally:
            if self.on_exit is not None:
                self.on_exit()

    def _get(self):
        """The next queue item, waiting at most ``timeout`` seconds."""
        t0 = time.perf_counter()
        while True:
            left = None if self.timeout is None else self.timeout - (time.perf_counter() - t0)
            try:
                return self.queue.get(timeout=1.0 if left is None else max(0.01, min(1.0, left)))
            except queue.Empty:
                pass
            if not self.thread.is_alive() and self.queue.empty():
                raise RuntimeError("the prefetch thread ended without handing over its last batch")
            if left is not None and left <= 0:
                where = self.describe() if self.describe is not None else ""
                raise PeerError(
                    f"the prefetch thread produced no batch for {self.timeout:.0f} s"
                    f"{f' (now in: {where})' if where else ''}; its collectives should have failed by then. "
                    "If data loading is merely slow, raise --timeout.")

    def __iter__(self) -> Iterator[Any]:
        self.thread.start()
        try:
            while True:
                t0 = time.perf_counter()
                status, item = self._get()
                self.wait_seconds += time.perf_counter() - t0
                if status == "error":
                    raise item
                if item is _DONE:
                    return
                yield item
        finally:
            self.stop.set()
            self.thread.join(timeout=self.timeout if self.timeout is not None else 60)
