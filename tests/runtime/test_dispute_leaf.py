"""A dispute's one instruction, re-executed (docs/disputes.md, "The committee referee"): the
runtime copies out the values of op-trace leaves at their trace points
(`run_traced(capture=...)`), and a committee member given the values of the leaves one graph
record reads (its graph leaf's tail) and the job's inputs re-executes that instruction alone
with the reference (compiler/reference/leaf.py) and reaches the digest the honest op-level
trace holds; for a faulty execution it reaches another digest than the faulty trace's, and it
refuses malformed served values instead of crashing."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

import compiler.api as api
from attest.digests import tensor_digest, tuple_digest
from compiler.config import load_config
from compiler.driver import compile_emulated_grid, compile_program, optimize
from compiler.hlo.commitment import graph_records, trace_leaves
from compiler.hlo.ir import Module
from compiler.hlo.printer import canonical_names
from compiler.hlo.shape import flatten
from compiler.program import load_program
from compiler.reference.leaf import (
    evaluate_leaf,
    leaf_count,
    leaf_digest,
    leaf_operands,
    result_leaf_digest,
)
from compiler.runtime.executable import Executable, Fault, TracedRun
from core.dtypes import from_name
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.targets import session_cache

# A sample of tests/fixtures, not all of them (every fixture passes; all of them would cost
# about a minute of compiling on two shared cores): each brings something the others lack.
# test_the_sample_covers_what_it_is_chosen_for checks the claims.
SAMPLE = (
    "conditional",  # conditionals (operands are tuples), tuple-output conditionals
    "fori_loop",  # a while loop
    "scan",  # a while loop with stacked outputs
    "topk_sampling",  # while, topk (tuple output), u64 and pred values, many fusions
    "transformer_block",  # fusion-heavy model (17 fusions of 23 leaves)
    "cnn_maxpool_train_step",  # convolutions, select-and-scatter, scatter, gather: 57 leaves
    "int4_matmul",  # s4 values (sub-byte, in int8 holders)
    "special_values",  # NaNs, infinities and pred values flowing between leaves
    "sort",  # a multi-operand sort (tuple output) with NaNs
    "rbg_dropout",  # rng-bit-generator (a (state, bits) tuple output)
    "bitcast_convert_iota",  # bitcast-convert of every width, a NaN bit pattern
    "fp8_matmul",  # f8e4m3fn and bf16 values
)
assert set(SAMPLE) <= set(FIXTURE_NAMES)


@cache
def _compiled(name: str) -> tuple[Fixture, Executable, Module]:
    fixture = Fixture(name)
    program = load_program(fixture.module_text)
    executable = compile_program(program, load_config(), cache_dir=session_cache())
    return fixture, executable, optimize(program, load_config())


@cache
def _captured_run(name: str) -> TracedRun:
    fixture, executable, _ = _compiled(name)
    return executable.run_traced(*fixture.inputs(), threads=2, capture=frozenset(range(len(executable.plan.trace_points))))


def _only(run: TracedRun, indices: tuple[int, ...]) -> dict[int, list[np.ndarray]]:
    """What a member fetches: the served values of exactly these leaves."""
    return {j: run.captured[j] for j in indices}


def _output_digest(outputs: list[np.ndarray]) -> str:
    return tuple_digest([tensor_digest(o) for o in outputs])


@pytest.mark.parametrize("name", SAMPLE)
def test_every_leaf_re_executed_from_its_operands_gives_the_trace_digest(name: str) -> None:
    fixture, executable, module = _compiled(name)
    run = _captured_run(name)
    inputs = fixture.inputs()
    n = len(run.instructions)
    leaves = trace_leaves(module)
    records = graph_records(module)
    names = canonical_names(module.entry)
    assert n == leaf_count(module) == len(records) - 1 == len(leaves)
    assert sorted(run.captured) == list(range(n))
    for i in range(n):
        name_i, opcode, digest = run.instructions[i]
        # Leaf i of the graph is the trace's instruction i, and what was captured is what was digested.
        assert (names[id(leaves[i])], leaves[i].opcode) == (name_i, opcode), (name, i)
        assert leaf_digest(run.captured[i]) == digest, (name, i)
        assert len(run.captured[i]) == len(flatten(leaves[i].shape))
        # The member fetches only the leaves the graph leaf's tail names.
        reads = leaf_operands(module, i)
        assert reads == records[i].trace_operands, (name, i)
        values = evaluate_leaf(module, i, _only(run, reads), inputs)
        assert leaf_digest(values) == digest, (name, i, name_i)
    # The result record: the job's outputs, resolved through the plumbing, no evaluation.
    reads = leaf_operands(module, n)
    assert reads == records[n].trace_operands
    outputs = evaluate_leaf(module, n, _only(run, reads), inputs)
    assert result_leaf_digest(outputs) == _output_digest(run.outputs)
    assert [tensor_digest(o) for o in outputs] == [tensor_digest(o) for o in run.outputs]


def test_the_sample_covers_what_it_is_chosen_for() -> None:
    opcodes: set[str] = set()
    dtypes: set[str] = set()
    tuple_outputs = nan_leaves = 0
    fusion_heavy = False
    for name in SAMPLE:
        _, executable, module = _compiled(name)
        run = _captured_run(name)
        opcodes |= {leaf.opcode for leaf in trace_leaves(module)}
        dtypes |= {executable.plan.buffers[b].dtype for p in executable.plan.trace_points for b in p.buffers}
        tuple_outputs += sum(len(values) > 1 for values in run.captured.values())
        nan_leaves += sum(any(v.dtype.kind == "f" and bool(np.isnan(v).any()) for v in values) for values in run.captured.values())
        fusion_heavy |= sum(leaf.opcode == "fusion" for leaf in trace_leaves(module)) >= 15
    assert {"while", "conditional", "fusion", "sort", "rng-bit-generator", "bitcast-convert"} <= opcodes
    assert {"s4", "pred", "bf16", "f8e4m3fn", "u64"} <= dtypes
    assert tuple_outputs >= 5 and nan_leaves >= 5 and fusion_heavy


def test_capture_changes_no_digest_and_copies_only_what_it_names() -> None:
    fixture, executable, _ = _compiled("conditional")
    plain = executable.run_traced(*fixture.inputs())
    assert plain.captured == {}
    some = executable.run_traced(*fixture.inputs(), capture=frozenset({1, 4}))
    assert some.instructions == plain.instructions == _captured_run("conditional").instructions
    assert [tensor_digest(o) for o in some.outputs] == [tensor_digest(o) for o in plain.outputs]
    assert sorted(some.captured) == [1, 4]
    for index, values in some.captured.items():
        buffers = [executable.plan.buffers[b] for b in executable.plan.trace_points[index].buffers]
        assert [(v.dtype, v.shape) for v in values] == [(np.dtype(from_name(b.dtype).numpy), b.dims) for b in buffers]
    # Fresh copies, not views of the arena that the next run (on other inputs) rewrites.
    before = {index: [tensor_digest(v) for v in values] for index, values in some.captured.items()}
    other = [a + 1 if a.dtype == np.float32 else a for a in fixture.inputs()]
    assert executable.run_traced(*other).instructions != plain.instructions
    assert {index: [tensor_digest(v) for v in values] for index, values in some.captured.items()} == before
    n = len(executable.plan.trace_points)
    for wrong in ({n}, {-1}):
        with pytest.raises(ValueError, match="outside 0"):
            executable.run_traced(*fixture.inputs(), capture=frozenset(wrong))


@pytest.mark.parametrize("name", ["transformer_block", "fori_loop"])
def test_a_committee_member_catches_a_faulty_leaf(name: str) -> None:
    fixture, executable, module = _compiled(name)
    honest = _captured_run(name)
    inputs = fixture.inputs()
    points = [p for p in executable.plan.trace_points if executable.plan.buffers[p.buffers[0]].kind == "arena"]
    target = points[len(points) // 2]
    n = len(honest.instructions)
    faulty = executable.run_traced(*inputs, fault=Fault(target.name, 3), capture=frozenset(range(n)))
    differing = [i for i in range(n) if honest.instructions[i][2] != faulty.instructions[i][2]]
    assert differing, name
    first = differing[0]
    assert faulty.instructions[first][0] == target.name
    # The faulty party serves values consistent with its own trace ...
    assert all(leaf_digest(faulty.captured[j]) == faulty.instructions[j][2] for j in range(n))
    # ... and the member, from the (still honest) operands it serves, computes the honest digest.
    reads = leaf_operands(module, first)
    assert all(j < first for j in reads)
    voted = leaf_digest(evaluate_leaf(module, first, _only(faulty, reads), inputs))
    assert voted == honest.instructions[first][2] != faulty.instructions[first][2]
    # Every other leaf of the faulty trace follows from its (faulty) operands: the fault can
    # only be shown at the first divergent instruction, which the bisection finds.
    for k in range(n):
        if k != first:
            assert leaf_digest(evaluate_leaf(module, k, faulty.captured, inputs)) == faulty.instructions[k][2], (name, k)


def _reader_of(module: Module, predicate) -> tuple[int, int]:  # noqa: ANN001
    """(i, j): a record i (the result record included) that reads leaf j, directly or
    through the tuple plumbing, j's shape satisfying `predicate`."""
    leaves = trace_leaves(module)
    for i in range(len(leaves) + 1):
        for j in leaf_operands(module, i):
            if predicate(leaves[j].shape):
                return i, j
    raise AssertionError("no such leaf")


def test_bad_served_values_are_refused_naming_the_leaf_and_its_shape() -> None:
    fixture, _, module = _compiled("topk_sampling")
    run = _captured_run("topk_sampling")
    inputs = fixture.inputs()
    i, j = _reader_of(module, lambda s: isinstance(s, api.ArrayShape) and s.dtype.name == "f32" and s.dims)
    shape = trace_leaves(module)[j].shape.str_without_layout()
    good = _only(run, leaf_operands(module, i))

    def refused(values: dict, match: str, **kwargs) -> None:  # noqa: ANN003
        with pytest.raises(ValueError, match=match):
            evaluate_leaf(module, i, values, inputs, **kwargs)

    refused({k: v for k, v in good.items() if k != j}, rf"no value of trace leaf {j} \({re.escape(shape)}\)")
    value = good[j][0]
    refused({**good, j: [value.astype(np.float64)]}, rf"trace leaf {j}: expected {re.escape(shape)} \(held as float32\), got float64")
    refused({**good, j: [value.reshape(-1)[:-1]]}, rf"trace leaf {j}: expected {re.escape(shape)}")
    refused({**good, j: [value, value]}, rf"trace leaf {j}: expected 1 flat buffer\(s\) for {re.escape(shape)}, got 2")
    refused({**good, j: value}, rf"trace leaf {j}: expected a list of 1 array")
    refused({**good, j: [value.tolist()]}, rf"trace leaf {j}: expected an array")
    # A value of the right type and shape, but not the one the chain proved.
    other = value.copy()
    other.reshape(-1)[0] = 1234.5
    refused({**good, j: [other]}, rf"trace leaf {j}: the supplied value's digest", trace_digests={j: run.instructions[j][2]})
    assert leaf_digest(evaluate_leaf(module, i, good, inputs, trace_digests={k: run.instructions[k][2] for k in good})) == run.instructions[i][2]
    # pred values hold 0 or 1.
    i2, j2 = _reader_of(module, lambda s: isinstance(s, api.ArrayShape) and s.dtype.name == "pred")
    served = _only(run, leaf_operands(module, i2))
    bad = served[j2][0].copy()
    bad.reshape(-1).view(np.uint8)[0] = 2
    with pytest.raises(ValueError, match=rf"trace leaf {j2}: pred.* not 0 or 1"):
        evaluate_leaf(module, i2, {**served, j2: [bad]}, inputs)
    # The index and the inputs.
    n = leaf_count(module)
    for index in (-1, n + 1):
        with pytest.raises(ValueError, match=rf"trace index {index} is outside 0\.\.{n}"):
            evaluate_leaf(module, index, good, inputs)
    with pytest.raises(ValueError, match="parameter 0"):
        evaluate_leaf(module, i, good, [np.zeros(3, np.int8), *inputs[1:]])
    with pytest.raises(ValueError, match="module takes"):
        evaluate_leaf(module, i, good, inputs[:-1])


def test_sub_byte_and_tuple_values_are_checked_element_by_element() -> None:
    # The s4 leaves of int4_matmul are outputs: the result record reads them.
    fixture, _, module = _compiled("int4_matmul")
    run = _captured_run("int4_matmul")
    n = leaf_count(module)
    j = next(j for j, leaf in enumerate(trace_leaves(module)) if leaf.shape.dtype.is_sub_byte)
    served = _only(run, leaf_operands(module, n))
    assert j in served
    assert result_leaf_digest(evaluate_leaf(module, n, served, fixture.inputs())) == _output_digest(run.outputs)
    bad = served[j][0].copy()
    bad.reshape(-1)[0] = 8  # s4 holds -8..7
    with pytest.raises(ValueError, match=rf"trace leaf {j}: s4.* outside \[-8, 7\]"):
        evaluate_leaf(module, n, {**served, j: [bad]}, fixture.inputs())
    # A tuple-output leaf: each buffer is checked, and named.
    fixture, _, module = _compiled("conditional")
    run = _captured_run("conditional")
    i, j = _reader_of(module, lambda s: not isinstance(s, api.ArrayShape))
    served = _only(run, leaf_operands(module, i))
    first, second = served[j]
    with pytest.raises(ValueError, match=rf"trace leaf {j} buffer 1: expected f32\[\]"):
        evaluate_leaf(module, i, {**served, j: [first, first]}, fixture.inputs())
    with pytest.raises(ValueError, match=rf"trace leaf {j}: expected 2 flat buffer\(s\)"):
        evaluate_leaf(module, i, {**served, j: [first]}, fixture.inputs())


def test_the_public_api_decides_a_leaf_and_the_result() -> None:
    fixture, _, module = _compiled("conditional")
    run = _captured_run("conditional")
    program = load_program(fixture.module_text)
    n = api.leaf_count(api.optimize(program, load_config()))
    for index in (0, 3, n):
        values, digest = api.leaf_of(program, load_config(), index, run.captured, fixture.inputs())
        expected = _output_digest(run.outputs) if index == n else run.instructions[index][2]
        assert digest == expected
        assert digest == (api.result_leaf_digest(values) if index == n else api.leaf_digest(values))
    assert api.evaluate_leaf is evaluate_leaf and api.leaf_operands is leaf_operands


def test_the_grid_path_captures_the_same_values() -> None:
    # A GPU target's run (its grid emulated on this host): the same trace, the same values.
    fixture = Fixture("conditional")
    program = load_program(fixture.module_text)
    config = load_config().with_target(cpu="nvptx-sm90")
    gpu = compile_emulated_grid(program, config)
    n = len(gpu.plan.trace_points)
    run = gpu.run_traced(*fixture.inputs(), capture=frozenset(range(n)))
    cpu = _captured_run("conditional")
    assert run.instructions == cpu.instructions
    module = optimize(program, config)
    for i in range(n):
        assert [tensor_digest(v) for v in run.captured[i]] == [tensor_digest(v) for v in cpu.captured[i]]
        assert leaf_digest(evaluate_leaf(module, i, run.captured, fixture.inputs())) == run.instructions[i][2]
