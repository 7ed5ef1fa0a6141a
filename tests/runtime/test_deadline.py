"""Run deadlines: a run past its deadline stops between steps or at a while-loop iteration,
with an error naming where; a run within it gives the same bits as a run without one."""

from __future__ import annotations

import time

import numpy as np
import pytest

from attest.digests import tensor_digest
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from compiler.runtime.stops import DeadlineExceeded
from harness.fixture_data import Fixture

FORI = Fixture("fori_loop")
MLP = Fixture("mlp_softmax")


def _with_trips(trips: int) -> list[np.ndarray]:
    arrays = FORI.inputs()
    arrays[3] = np.array(trips, dtype=np.int32)  # the loop's trip count is an input
    return arrays


def test_a_run_past_its_deadline_stops_before_the_first_step() -> None:
    executable = compile_program(load_program(MLP.module_text), load_config())
    with pytest.raises(DeadlineExceeded, match=r"before %"):
        executable.run(*MLP.inputs(), deadline=time.monotonic() - 1)
    with pytest.raises(DeadlineExceeded):
        executable.run_traced(*MLP.inputs(), deadline=time.monotonic() - 1)


def test_a_long_loop_stops_at_an_iteration_once_past_the_deadline() -> None:
    executable = compile_program(load_program(FORI.module_text), load_config())
    trips = 50_000_000  # far more than runs in the deadline's 0.2 s
    with pytest.raises(DeadlineExceeded, match=r"in iteration \d+ of while loop %") as caught:
        executable.run_traced(*_with_trips(trips), deadline=time.monotonic() + 0.2)
    stopped_at = int(str(caught.value).split("in iteration ")[1].split()[0])
    assert 0 < stopped_at < trips


def test_a_run_within_its_deadline_gives_the_same_bits() -> None:
    executable = compile_program(load_program(FORI.module_text), load_config())
    arrays = _with_trips(1_000)
    plain = executable.run_traced(*arrays)
    bounded = executable.run_traced(*arrays, deadline=time.monotonic() + 3600)
    assert [tensor_digest(o) for o in bounded.outputs] == [tensor_digest(o) for o in plain.outputs]
    assert bounded.instructions == plain.instructions
