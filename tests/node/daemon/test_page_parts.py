"""Times on the node's pages as people say them, and a chain deadline that never reads as
still to come once its phase is over."""

from __future__ import annotations

import pytest

from node.daemon.page_parts import duration, relative, when
from node.daemon.pages import _deadline


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0.004, "0.00 s"), (0.42, "0.42 s"), (3.25, "3.2 s"), (23.4, "23 s"), (59.6, "1 min"), (125, "2 min 5 s"), (900, "15 min"),
     (3600 + 600, "1 h 10 min"), (7200, "2 h"), (86400, "1 day"), (3 * 86400 + 5, "3 days")],
)  # fmt: skip
def test_a_duration_is_said_in_the_largest_units_that_fit(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_a_moment_is_said_from_now_with_its_exact_time_on_hover() -> None:
    assert relative(1000, 1000.4) == "just now"
    assert relative(1023, 1000) == "in 23 s" and relative(880, 1000) == "2 min ago"
    shown = when(0, 120, "finalized ")
    assert ">finalized 2 min ago</time>" in shown and "title='1970-01-01 00:00:00 UTC'" in shown and "datetime=1970-01-01T00:00:00Z" in shown


def test_a_closed_phase_never_shows_a_deadline_to_come() -> None:
    assert ">in 30 s</time>" in _deadline(1030, 1000, closed=False)
    early = _deadline(1030, 1000, closed=True)  # every slot moved before the deadline
    assert "closed early" in early and "in 30 s" in early and ">in 30 s</time>" not in early
    assert ">closed 1 min ago</time>" in _deadline(940, 1000, closed=True)
    assert ">closed 1 min ago</time>" in _deadline(940, 1000, closed=False)  # a deadline passed is closed too
