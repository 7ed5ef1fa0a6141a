"""Helpers shared by the node's tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from node.chain.watcher import JobPending

T = TypeVar("T")


def settled(get: Callable[[], T], timeout: float = 120.0) -> T:
    """What `get` gives once it stops raising JobPending (the executor's work in the
    background); fails the test past `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            return get()
        except JobPending:
            assert time.monotonic() < give_up, "still pending"
            time.sleep(0.05)
