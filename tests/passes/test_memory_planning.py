"""Scheduling and buffer assignment: the order is a valid schedule, no two live values share
memory on any fixture, and the transformer block and CNN fixtures need at least 30% less
arena than an allocation without reuse."""

from __future__ import annotations

import json

import pytest

from compiler.codegen import buffer_assignment
from compiler.codegen import plan as P
from compiler.codegen.lower import lower_module
from compiler.config import load_config
from compiler.driver import EMITTERS, optimize
from compiler.hlo import load_module
from compiler.passes.scheduling import Scheduling, estimated_peak
from compiler.program import load_program
from harness.fixture_data import FIXTURE_NAMES, Fixture
from node.cli import main
from tests.hlo_variants import rename_instructions, reverse_independent_parameters


def _planned(name: str) -> tuple[P.Plan, buffer_assignment.Assignment]:
    config = load_config()
    module = optimize(load_program(Fixture(name).module_text), config)
    lowering, plan = lower_module(module, config, EMITTERS)
    assignment = buffer_assignment.assign(plan, lowering.in_place)
    return buffer_assignment.apply(plan, assignment), assignment


def _live_steps(plan: P.Plan) -> dict[int, tuple[int, int]]:
    """Independently of the assignment: the first and last top-level step touching each arena
    buffer (outputs to the end), nested steps counted at their loop or conditional."""
    spans: dict[int, tuple[int, int]] = {}
    for index, step in enumerate(plan.steps):
        for buffer_id in P.touched(step):
            first, _ = spans.get(buffer_id, (index, index))
            spans[buffer_id] = (first, index)
    for buffer_id in plan.outputs:
        first, _ = spans.get(buffer_id, (len(plan.steps), 0))
        spans[buffer_id] = (first, len(plan.steps))
    return {b: s for b, s in spans.items() if plan.buffers[b].kind == "arena"}


def _spans_in(steps) -> dict[int, tuple[int, int]]:
    """The first and last step of `steps` touching each buffer (nested steps counted at
    their loop or conditional)."""
    spans: dict[int, tuple[int, int]] = {}
    for index, step in enumerate(steps):
        for buffer_id in P.touched(step):
            spans[buffer_id] = (spans.get(buffer_id, (index, index))[0], index)
    return spans


def _sequence_making(steps, buffer_id: int):
    """(the step list, the index in it) of the first kernel or copy step that touches
    `buffer_id`, looking into loops and conditionals."""
    for index, step in enumerate(steps):
        if buffer_id not in P.touched(step):
            continue
        if isinstance(step, (P.KernelStep, P.CopyStep)):
            return steps, index
        nested = [step.condition, step.body] if isinstance(step, P.WhileStep) else list(getattr(step, "branches", ()))
        for inner in nested:
            found = _sequence_making(list(inner), buffer_id)
            if found is not None:
                return found
    return None


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_no_two_live_buffers_overlap(name: str) -> None:
    plan, assignment = _planned(name)
    spans = _live_steps(plan)
    in_place = {frozenset(pair) for pair in assignment.in_place}
    for output, operand in assignment.in_place:
        # Sharing is only allowed where the operand dies in the very step that makes the
        # output (a kernel, or a copy of the operand into it that the in-place update then
        # follows), in the step list where that happens (a loop body's, where the operand is
        # the state the body replaces).
        steps, first = _sequence_making(plan.steps, output)
        local = _spans_in(steps)
        assert local[operand][1] == local[output][0] == first, (output, operand)
        step = steps[first]
        assert isinstance(step, P.KernelStep) or (isinstance(step, P.CopyStep) and (operand, output) in zip(step.sources, step.targets, strict=True)), step
    ids = sorted(spans)
    for position, a in enumerate(ids):
        for b in ids[position + 1 :]:
            (a_first, a_last), (b_first, b_last) = spans[a], spans[b]
            if a_last < b_first or b_last < a_first or frozenset((a, b)) in in_place:
                continue
            ra, rb = plan.buffers[a], plan.buffers[b]
            if ra.nbytes and rb.nbytes:
                assert ra.offset + ra.nbytes <= rb.offset or rb.offset + rb.nbytes <= ra.offset, f"buffers {a} and {b} overlap"
    for buffer_id in ids:
        assert plan.buffers[buffer_id].offset + plan.buffers[buffer_id].nbytes <= plan.arena_bytes
    assert buffer_assignment.conflicts(plan, assignment) == []


@pytest.mark.parametrize("name", ["transformer_block", "cnn"])
def test_compile_json_reports_peak_bytes_well_below_no_reuse(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = Fixture(name).directory / "module.hlo"
    assert main(["compile", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0 < report["peak_bytes"] <= 0.7 * report["no_reuse_bytes"]


def test_values_live_together_get_distinct_memory_and_a_dying_operand_is_reused() -> None:
    text = """
    HloModule m
    ENTRY e {
      p = f32[1024] parameter(0)
      a = f32[1024] exponential(p)
      b = f32[1024] negate(p)
      ROOT c = f32[1024] add(a, b)
    }
    """
    config = load_config().with_pipeline("none")
    lowering, plan = lower_module(load_module(text), config, EMITTERS)
    assignment = buffer_assignment.assign(plan, lowering.in_place)
    plan = buffer_assignment.apply(plan, assignment)
    a, b, c = (step.buffers[-1] for step in plan.steps)  # each kernel's output is its last buffer
    assert {a, b, c} == {buf.id for buf in plan.buffers if buf.kind == "arena"}
    assert plan.buffers[a].offset != plan.buffers[b].offset
    # c is computed in place over a (a dies in the kernel that makes c): two buffers suffice.
    assert assignment.in_place == [(c, a)]
    assert plan.arena_bytes == 2 * 4096 < assignment.no_reuse_bytes == 3 * 4096


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_schedule_is_topological_and_not_worse_than_post_order(name: str) -> None:
    module = load_module(Fixture(name).module_text)
    before = {c.name: estimated_peak(c.post_order(), c.root) for c in module.computations}
    Scheduling().run(module)
    for computation in module.computations:
        order = computation.execution_order()
        assert len(order) == len(computation.post_order())
        seen: list[int] = []
        for instruction in order:
            assert all(any(id(op) == s for s in seen) for op in instruction.operands), instruction.name
            seen.append(id(instruction))
        assert estimated_peak(order, computation.root) <= before[computation.name]


@pytest.mark.parametrize("name", ["transformer_block", "mlp_train_step", "scan"])
def test_schedule_does_not_depend_on_names_or_input_order(name: str) -> None:
    from compiler.hlo import canonical_text

    texts = []
    for variant in (Fixture(name).module_text, rename_instructions(Fixture(name).module_text), reverse_independent_parameters(Fixture(name).module_text)):
        module = load_module(canonical_text(load_module(variant)))
        Scheduling().run(module)
        texts.append(canonical_text(module))
    assert texts[0] == texts[1] == texts[2]
    assert "is_scheduled=true" in texts[0]
