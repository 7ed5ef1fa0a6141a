"""A thread pool that partitions a kernel's work items into contiguous ranges.

Kernels compute whole work items (an output element, a row, a block of rows), and every work
item's result depends only on the inputs, so any partition, and any number of threads, gives
the same bits. ctypes releases the GIL for the duration of each kernel call.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache


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


class KernelThreadPool:
    """`threads` workers (the calling thread is one of them)."""

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="vxla") if threads > 1 else None

    def run(self, kernel: Callable[..., object], extent: int, grain: int, *leading: object) -> None:
        """Calls kernel(*leading, begin, end) over a partition of [0, extent) and waits for
        all."""
        ranges = partition(extent, self.threads, grain)
        if not ranges:
            return
        if self._executor is None or len(ranges) == 1:
            for begin, end in ranges:
                kernel(*leading, begin, end)
            return
        futures = [self._executor.submit(kernel, *leading, begin, end) for begin, end in ranges[1:]]
        kernel(*leading, *ranges[0])
        for future in futures:
            future.result()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
