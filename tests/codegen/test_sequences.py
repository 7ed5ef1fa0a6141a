"""Kernel sequences: runs of small kernel steps are called as one generated function, with the
same bits; an observer still sees every instruction's kernel, in plan order."""

from __future__ import annotations

from compiler.codegen import plan as P
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from tests.codegen.test_fixtures_backend import assert_identical, reference_outputs
from tests.fixture_data import Fixture


def _expanded(steps: tuple[P.Step, ...] | list[P.Step]) -> list[str]:
    names: list[str] = []
    for step in steps:
        if isinstance(step, P.KernelStep):
            names.extend(_expanded(step.parts) if step.parts else [step.instruction])
    return names


def test_small_steps_run_as_one_call_with_the_same_bits() -> None:
    fixture = Fixture("mlp_softmax")
    executable = compile_program(load_program(fixture.module_text), load_config(), cache_dir=False)
    sequences = [s for s in executable.plan.steps if isinstance(s, P.KernelStep) and s.parts]
    assert sequences and all(len(s.parts) >= 2 for s in sequences)
    for sequence in sequences:
        assert all(part.extent < 2 * part.grain for part in sequence.parts)  # one range on any thread count
        assert set(sequence.buffers) == {b for part in sequence.parts for b in part.buffers}
    for threads in (1, 2, 4):
        assert_identical(executable.run(*fixture.inputs(), threads=threads), reference_outputs(fixture), f"threads={threads}")


def test_an_observer_sees_every_kernel_of_a_sequence() -> None:
    fixture = Fixture("transformer_block")
    executable = compile_program(load_program(fixture.module_text), load_config(), cache_dir=False)
    seen: list[str] = []
    outputs = executable.run(*fixture.inputs(), observer=lambda name, state: seen.append(name))
    assert seen == _expanded(executable.plan.steps)
    assert len(seen) > len(executable.plan.steps)
    assert_identical(outputs, reference_outputs(fixture), "observed run")


def test_plans_with_sequences_survive_json() -> None:
    fixture = Fixture("mlp_softmax")
    plan = compile_program(load_program(fixture.module_text), load_config(), cache_dir=False).plan
    assert P.Plan.from_json(plan.to_json()) == plan
