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

_DONE = object()


class Prefetcher:
    """Iterate ``produce(step)`` for ``step in range(steps)``, computed ahead in a thread.

    Args:
        produce: builds step ``i``'s batch (may issue collectives on its own group).
        steps: number of batches.
        depth: how many finished batches may wait in the queue (>= 1).

    Attributes (after iteration): ``wait_seconds``: time the consumer waited for a batch.
    An exception in ``produce`` is re-raised in the consumer.
    """

    def __init__(self, produce: Callable[[int], Any], steps: int, depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"pipeline depth must be >= 1, found {depth}")
        self.produce = produce
        self.steps = steps
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

    def __iter__(self) -> Iterator[Any]:
        self.thread.start()
        try:
            while True:
                t0 = time.perf_counter()
                status, item = self.queue.get()
                self.wait_seconds += time.perf_counter() - t0
                if status == "error":
                    raise item
                if item is _DONE:
                    return
                yield item
        finally:
            self.stop.set()
            self.thread.join(timeout=60)
