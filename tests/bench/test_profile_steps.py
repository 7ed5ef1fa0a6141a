"""bench/profile_steps.py and Executable.step_times: a run taken one top-level step at a
time gives the plan's steps in order, each named by its instruction, and the outputs of a
whole run (the times are printed, never asserted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import compiler
from bench import profile_steps
from harness.fixture_data import Fixture

MLP = Fixture("mlp_softmax")


def test_step_times_names_every_step_in_plan_order() -> None:
    executable = compiler.compile(MLP.module_text, threads=1, cache_dir=False)
    times = executable.step_times(*MLP.inputs())
    assert [name for name, _ in times] == [getattr(step, "instruction", step.kind) for step in executable.plan.steps]
    assert all(seconds >= 0 for _, seconds in times)


def test_the_profile_lists_the_slowest_steps_and_the_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "module.hlo"
    module.write_text(MLP.module_text)
    np.savez(tmp_path / "inputs.npz", **{f"in{k}": array for k, array in enumerate(MLP.inputs())})
    assert profile_steps.main([str(tmp_path), "--repeat", "1", "--top", "3", "--target", "x86-64-v3"]) == 0
    out = capsys.readouterr().out
    steps = len(compiler.compile(MLP.module_text, target="x86-64-v3", cache_dir=False).plan.steps)
    assert f"target x86-64-v3, 1 thread(s), {steps} steps" in out
    listed = out.split("instruction\n", 1)[1].split("\n\nby kind:", 1)[0].splitlines()
    assert len(listed) == min(3, steps)
    assert "fusion(" in out.split("by kind:", 1)[1] or "dot" in out.split("by kind:", 1)[1]
