"""Which cases of a sweep `make test` runs, defined once.

A sweep over every fixture (or every fixture and target) is the suite's largest cost. Where
another test already checks the same property on every case, a sweep runs a rotating share:
case i when i % share == offset % share, with an offset each test picks (its own name's
place, a target's place), so different tests cover different fixtures and every fixture is
covered by some. The sample depends on nothing but the names, so every run and every host
checks the same cases.

VXLA_TEST_EVERY=1 (`make test-every`) runs every case of every sweep; `make golden` and
`python tools/golden_hashes.py --check` compile every fixture for every target regardless.
The test summary says which it was (tests/conftest.py).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import TypeVar

EVERY_VARIABLE = "VXLA_TEST_EVERY"

T = TypeVar("T")


def every() -> bool:
    """Whether this session runs every case of every sweep."""
    return os.environ.get(EVERY_VARIABLE) == "1"


def offset_of(offset: int | str) -> int:
    """An offset as given, or a stable one for a label (a test's name): the same in every
    process and run."""
    return zlib.crc32(offset.encode()) if isinstance(offset, str) else offset


def share_of(items: Sequence[T], share: int, offset: int | str) -> list[T]:
    """Every `share`-th item of `items` from `offset` (all of them under VXLA_TEST_EVERY)."""
    if every() or share <= 1:
        return list(items)
    start = offset_of(offset) % share
    return [item for index, item in enumerate(items) if index % share == start]


def one_each(items: Sequence[T], choices: Sequence[str], offset: int | str = 0) -> list[tuple[T, str]]:
    """(item, choice) pairs, each item with one of `choices` in turn (every pair under
    VXLA_TEST_EVERY): each choice gets about len(items) / len(choices) items."""
    if not choices:
        return []
    if every():
        return [(item, choice) for item in items for choice in choices]
    start = offset_of(offset)
    return [(item, choices[(index + start) % len(choices)]) for index, item in enumerate(items)]
