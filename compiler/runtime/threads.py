"""Threads for runs: the partition of a kernel's work items into contiguous ranges, and the
pool of workers that run the plan's native entry together.

Kernels compute whole work items (an output element, a row, a block of rows), and every work
item's result depends only on the inputs, so any partition, and any number of threads, gives
the same bits. `partition` is the definition; the native entry computes the same ranges.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


def machine_threads() -> int:
    """The threads a run uses unless told otherwise: the cores this process may run on
    (results never depend on the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@lru_cache(maxsize=4096)
def partition(extent: int, parts: int, grain: int) -> tuple[tuple[int, int], ...]:
    """Contiguous ranges covering [0, extent): at most `parts`, each at least `grain` long
    (except when extent itself is smaller)."""
    if extent <= 0:
        return ()
    count = max(1, min(parts, extent // max(grain, 1)))
    base, extra = divmod(extent, count)
    ranges, start = [], 0
    for index in range(count):
        stop = start + base + (1 if index < extra else 0)
        ranges.append((start, stop))
        start = stop
    return tuple(ranges)


class RunThreads:
    """`threads` workers (the calling thread is one of them) that each run the same work
    with their own index, as the plan's native entry expects (compiler/codegen/native_plan.py:
    the workers split every step among themselves). ctypes releases the GIL for the duration
    of each native call, so the workers run in parallel. Each pool thread waits on a lock of
    its own, which costs less to hand work through than an executor's queue and futures."""

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads
        self._work: Callable[[int], object] | None = None
        self._results: list[object] = [None] * threads
        self._errors: list[BaseException | None] = [None] * threads
        self._start = [threading.Lock() for _ in range(threads)]
        self._done = [threading.Lock() for _ in range(threads)]
        self._closed = False
        self._run_lock = threading.Lock()  # one run at a time through the pool
        self._workers = []
        for index in range(1, threads):
            self._start[index].acquire()
            self._done[index].acquire()
            worker = threading.Thread(target=self._serve, args=(index,), name=f"vxla-{index}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def _serve(self, index: int) -> None:
        while True:
            self._start[index].acquire()
            if self._closed:
                return
            work = self._work
            try:
                self._results[index] = work(index) if work is not None else None
            except BaseException as error:  # noqa: BLE001 - handed back to the caller
                self._errors[index] = error
            self._done[index].release()

    def run(self, work: Callable[[int], T]) -> list[T]:
        """work(0) on the calling thread and work(i) on worker i for every other index; the
        results in index order, once all have returned."""
        if self.threads == 1:
            return [work(0)]
        with self._run_lock:
            self._work = work
            for index in range(1, self.threads):
                self._errors[index] = None
                self._start[index].release()
            try:
                first = work(0)
            finally:
                for index in range(1, self.threads):
                    self._done[index].acquire()
            self._work = None
            for error in self._errors[1:]:
                if error is not None:
                    raise error
            return [first, *self._results[1:]]  # type: ignore[list-item]

    def close(self) -> None:
        """Ends the pool threads (waiting for a run in progress)."""
        with self._run_lock:
            if self._closed:
                return
            self._closed = True
            for index in range(1, self.threads):
                self._start[index].release()
        for worker in self._workers:
            worker.join()
