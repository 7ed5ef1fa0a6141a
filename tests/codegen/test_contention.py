"""The same bits at any thread count while the machine is busy: the contention modules
(tests/fixtures/contention, one for each way a plan splits work: gemm epilogues on the flat,
row and scalar paths with column items, a matrix-vector epilogue, packed gemms,
reductions in one and two kernels, reduce-window, select-and-scatter, gather, scatter and
dynamic-update-slice, sort, a while loop and a conditional, convolutions, loop fusions on
each path) run with more threads than cores while other processes keep every core busy,
each run compared bit for bit with the 1-thread run, for some 8 seconds in all (at least a
round of every thread count on each module; VXLA_CONTENTION_SECONDS=600 runs them longer), on
the pinned default target and the widest this host runs.

Both builds run: the pinned one, and the schedule-perturbed one (seeded delays at every
barrier and step, every kernel split as finely as it goes, poisoned memory), which shows a
race on a quiet machine too: every JAX-exported fixture runs on it as well, and the last test
shows it catches the epilogue race the row path once had (gemm work items that computed each
other's columns) when that is put back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from attest.digests import tensor_digest
from compiler.codegen import fusion
from compiler.codegen import plan as P
from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.program import load_program
from compiler.reference import evaluate
from harness.contention import (
    Contender,
    Tally,
    busy_cores,
    contend,
    cores,
    module_inputs,
    thread_counts,
)
from harness.fixture_data import FIXTURE_NAMES, GOLDEN_HASHES_PATH, Fixture
from harness.sampling import share_of
from harness.targets import DEFAULT, RUNNABLE, config

MODULES = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "contention").glob("*.hlo"))
SECONDS = float(os.environ.get("VXLA_CONTENTION_SECONDS", "8"))
# The pinned default target and the widest this host runs (their gemms block differently, so
# their work splits differently).
TARGETS = tuple(dict.fromkeys(t for t in (DEFAULT, RUNNABLE[-1] if RUNNABLE else DEFAULT)))


def _splits(step: P.KernelStep) -> bool:
    """Whether the pinned plan shares the step's work items among two or more workers."""
    return step.extent >= 2 * max(step.grain, 1)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_contended_runs_give_the_one_thread_bits(path: Path) -> None:
    text = path.read_text()
    module = load_module(text)
    inputs = module_inputs(module)
    program = load_program(text)
    reference = [np.ascontiguousarray(o).tobytes() for o in evaluate(module, inputs)]
    contenders = []
    for target in TARGETS:
        contender = Contender.of(path.stem, program, config(target), inputs)
        assert contender.expected == reference, f"{path.stem} on {target}: 1 thread differs from the reference"
        # The module must exercise what it is here for: work the pinned plan splits.
        assert any(_splits(s) for s in P.walk(contender.pinned.plan.steps) if isinstance(s, P.KernelStep)), f"{path.stem}: no step splits its work"
        contenders.append(contender)
    tally = Tally()
    threads = thread_counts()
    assert max(threads) > cores()
    # The cores are busy while the runs are (the compiles above, and the other tests of the
    # session, need no spinners beside them).
    with busy_cores() as busy:
        assert busy == cores()
        contend(contenders, threads, SECONDS / len(MODULES), tally)
    assert not tally.differences, f"{len(tally.differences)} of {tally.total} contended runs differ from 1 thread; first: " + "; ".join(
        map(str, tally.differences[:5])
    )


def test_the_modules_cover_every_way_a_plan_splits_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each family the contention test is for has a module whose pinned plan splits it (of
    the gemm epilogues and loop fusions, on each loop path)."""
    kernels: set[str] = set()
    modes: set[str] = set()
    original = fusion.loop_mode

    def spy(computation, results, width, opaque=None):
        mode = original(computation, results, width, opaque)
        modes.add(("epilogue-" if opaque is not None else "loop-") + mode)
        return mode

    monkeypatch.setattr(fusion, "loop_mode", spy)
    for path in MODULES:
        executable = compile_program(load_program(path.read_text()), config(DEFAULT), cache_dir=False)
        steps = list(P.walk(executable.plan.steps))
        kernels.update(s.kernel.split("_")[1] for s in steps if isinstance(s, P.KernelStep) and _splits(s))
        kernels.update(type(s).__name__ for s in steps if isinstance(s, (P.WhileStep, P.ConditionalStep)))
    # (A scatter is one work item by the contract: updates meet an element in their order.)
    wanted_kernels = {"dot", "pack", "reduce", "running", "select", "gather", "dynamic", "sort", "convolution", "fusion", "WhileStep", "ConditionalStep"}
    assert wanted_kernels <= kernels, f"no module splits {sorted(wanted_kernels - kernels)}"
    wanted_modes = {f"{kind}-{mode}" for kind in ("epilogue", "loop") for mode in ("flat", "row", "scalar")}
    assert wanted_modes <= modes, f"no fusion on {sorted(wanted_modes - modes)}"


@pytest.mark.parametrize("name", share_of(FIXTURE_NAMES, 3, "perturbed build"))
def test_fixtures_give_their_bits_on_a_perturbed_build(name: str) -> None:
    """The JAX-exported fixtures (a rotating third: harness/sampling.py), on a machine at rest: the perturbed build's runs with 2 and 3
    threads (two schedule seeds each) give the reference's digests (tools/golden_hashes.py
    records them)."""
    fixture = Fixture(name)
    expected = json.loads(GOLDEN_HASHES_PATH.read_text())["fixtures"][name]["output_digests"]
    perturbed = compile_program(load_program(fixture.module_text), config(DEFAULT).with_schedule_perturbation(), cache_dir=False)
    inputs = fixture.inputs()
    for threads in (2, 3):
        for seed in (1, 2):
            outputs = perturbed.run(*inputs, threads=threads, schedule_seed=seed * 10 + threads)
            assert [tensor_digest(o) for o in outputs] == expected, f"{name}, {threads} threads, schedule seed {seed * 10 + threads}"


def _row_loop_of_whole_rows(emit):
    """emit_element_loop as it once was: on the row path it computed the
    whole rows its range ends in, where a gemm work item owns only some of their columns."""

    def emit_whole_rows(emitter, results, bases, begin, end, mode):
        if mode == "row":
            b = emitter.kernel.builder
            length = fusion.I64(results[0].array_shape.dims[-1])
            begin, end = b.mul(b.udiv(begin, length), length), b.mul(b.udiv(end, length), length)
        emit(emitter, results, bases, begin, end, mode)

    return emit_whole_rows


def test_a_perturbed_build_catches_work_items_that_share_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The epilogue race put back: the perturbed build shows it on a machine at rest
    (this test starts no busy processes), within a few seeded runs."""
    monkeypatch.setattr(fusion, "emit_element_loop", _row_loop_of_whole_rows(fusion.emit_element_loop))
    path = next(p for p in MODULES if p.stem == "epilogue_row")
    module = load_module(path.read_text())
    inputs = module_inputs(module)
    expected = [np.ascontiguousarray(o).tobytes() for o in evaluate(module, inputs)]
    perturbed = compile_program(load_program(path.read_text()), config(DEFAULT).with_schedule_perturbation(), cache_dir=False)
    differing = 0
    for seed in range(1, 21):
        got = [np.ascontiguousarray(o).tobytes() for o in perturbed.run(*inputs, threads=4, schedule_seed=seed)]
        differing += got != expected
    assert differing > 0, "the perturbed build did not show work items that read each other's columns"
