"""A bounded map that forgets what was used longest ago: the one implementation behind the
node's caches (parsed modules, input records, traces, drawn graphs, executables), so each
states only its bounds."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most `entries` entries and, with `size`, at most `capacity` in the sum of their
    sizes; past either bound the least recently used entries go first. A value larger than
    `capacity` on its own is not kept. Reading an entry (`get`) makes it the most recent.

    Not locked: an owner shared between threads holds its own lock around each call (most
    hold it for more than the call)."""

    def __init__(self, entries: int, capacity: int = 0, size: Callable[[V], int] | None = None) -> None:
        if entries < 1 or (size is not None and capacity < 1):
            raise ValueError(f"an Lru keeps at least one entry of some size (entries={entries}, capacity={capacity})")
        self.entries = entries
        self.capacity = capacity
        self._size = size
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._total = 0

    def get(self, key: K) -> V | None:
        """The value kept for `key` (now the most recent), or None."""
        value = self._kept.get(key)
        if value is not None:
            self._kept.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Keeps `value` for `key` as the most recent, then forgets past the bounds."""
        size = self._size(value) if self._size is not None else 0
        if self._size is not None and size > self.capacity:
            return
        self.pop(key)
        self._kept[key] = value
        self._total += size
        while len(self._kept) > self.entries or (self._size is not None and self._total > self.capacity):
            self.pop(next(iter(self._kept)))

    def pop(self, key: K) -> V | None:
        """Forgets `key`; its value, or None."""
        value = self._kept.pop(key, None)
        if value is not None and self._size is not None:
            self._total -= self._size(value)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(self._kept)
