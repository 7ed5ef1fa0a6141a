"""The graph commitment (compiler/hlo/commitment.py, docs/disputes.md): its records are the
op-level trace's instructions, one target's commitment is every target's, and it moves when
what one instruction computes moves."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from attest import tensor_digest
from attest.commitment import commitment_root, root_from_commitment_proof
from attest.digests import sha256_hex
from compiler.config import CompilerConfig, load_config
from compiler.driver import compile_program, graph_commitment, optimize, optimized_plan
from compiler.hlo.commitment import (
    GraphCommitment,
    GraphRecord,
    commit_graph,
    describe,
    graph_records,
)
from compiler.hlo.opcodes import NOT_TRACED
from compiler.program import load_program
from compiler.targets import TARGET_CPUS
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.targets import DEFAULT, config, session_cache

CONFIG = load_config()


def commitment(text: str, cfg: CompilerConfig = CONFIG) -> GraphCommitment:
    return graph_commitment(load_program(text), cfg)


def trace_of_plan(text: str, cfg: CompilerConfig = CONFIG) -> list[tuple[str, str]]:
    _, plan = optimized_plan(load_program(text), cfg)
    return [(point.name, point.opcode) for point in plan.trace_points]


def names_and_opcodes(graph: GraphCommitment) -> list[tuple[str, str]]:
    return [(record.name, record.opcode) for record in graph.records[: graph.trace_leaves]]


# --- the records are the op-level trace ------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_records_are_the_trace_points_of_every_fixture(name: str) -> None:
    text = Fixture(name).module_text
    graph = commitment(text)
    assert len(graph.records) == graph.trace_leaves + 1
    assert names_and_opcodes(graph) == trace_of_plan(text)
    assert [r.index for r in graph.records] == list(range(graph.trace_leaves + 1))
    assert graph.records[-1].opcode == graph.records[-1].name == "result"
    assert not any(r.opcode in NOT_TRACED for r in graph.records)


# A while loop (fori_loop, scan, topk_sampling), a conditional, fusions (transformer_block),
# an opt-barrier (remat_transformer_train_step), one array output that an instruction computes
# (cnn), tuple outputs (most).
RUN = ["fori_loop", "scan", "conditional", "transformer_block", "remat_transformer_train_step", "cnn", "argmax"]


@pytest.mark.parametrize("name", RUN)
def test_records_are_what_an_op_level_run_traces(name: str) -> None:
    fixture = Fixture(name)
    program = load_program(fixture.module_text)
    executable = compile_program(program, config(DEFAULT), cache_dir=session_cache(), threads=1)
    run = executable.run_traced(*fixture.inputs())
    graph = graph_commitment(program, config(DEFAULT))
    assert graph.trace_leaves == len(run.instructions) > 0
    assert names_and_opcodes(graph) == [(name, opcode) for name, opcode, _ in run.instructions]
    # The execution commitment has the same shape: leaves 0..n-1 the trace, leaf n the result.
    assert graph.root == commitment_root(graph.leaves(), graph.records[-1].leaf())


OUTPUT_IS_PARAMETERS = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  a = f32[4] add(p0, p1)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(p1, a, p0)
}
"""

ONLY_A_PARAMETER = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  ROOT p1 = f32[4] parameter(1)
}
"""


def test_outputs_that_are_parameters() -> None:
    graph = commitment(OUTPUT_IS_PARAMETERS)
    assert names_and_opcodes(graph) == trace_of_plan(OUTPUT_IS_PARAMETERS) == [("add.2", "add")]
    assert graph.records[0].operands == ({"parameter": 0}, {"parameter": 1})
    result = graph.records[1]
    assert result.operands == ({"tuple": [{"parameter": 1}, {"trace": 0}, {"parameter": 0}]},)
    assert result.shape == "(f32[4], f32[4], f32[4])" and result.trace_operands == (0,)
    executable = compile_program(load_program(OUTPUT_IS_PARAMETERS), config(DEFAULT), cache_dir=False, threads=1)
    run = executable.run_traced(np.ones(4, np.float32), np.zeros(4, np.float32))
    assert [(n, o) for n, o, _ in run.instructions] == names_and_opcodes(graph)
    # No instruction computes anything: no leaves, the result names the parameter.
    empty = commitment(ONLY_A_PARAMETER)
    assert empty.trace_leaves == 0 and trace_of_plan(ONLY_A_PARAMETER) == []
    assert [r.to_dict()["operands"] for r in empty.records] == [[{"parameter": 1}]]
    assert empty.root == commitment_root([], empty.records[0].leaf())
    assert root_from_commitment_proof(empty.records[0].leaf(), 0, 0, empty.proof(0)) == empty.root


PLUMBING = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  x = f32[4] exponential(p0)
  t = (f32[4], (f32[4], f32[4])) tuple(x, (f32[4], f32[4]) tuple(p0, c))
  b = (f32[4], (f32[4], f32[4])) opt-barrier(t)
  g0 = f32[4] get-tuple-element(b), index=0
  g1 = (f32[4], f32[4]) get-tuple-element(b), index=1
  g11 = f32[4] get-tuple-element(g1), index=1
  m = f32[4] multiply(g0, g11)
  ROOT r = (f32[4], (f32[4], f32[4])) tuple(m, g1)
}
"""


def test_positions_follow_the_tuple_plumbing() -> None:
    # The module as written (no pass): parameters, a constant, nested tuples, an opt-barrier
    # and get-tuple-elements all resolve to where the value comes from.
    unoptimized = CONFIG.with_pipeline("none")
    graph = commitment(PLUMBING, unoptimized)
    assert names_and_opcodes(graph) == trace_of_plan(PLUMBING, unoptimized) == [("exponential.1", "exponential"), ("multiply.9", "multiply")]
    digest = tensor_digest(np.array([1, 2, 3, 4], np.float32))
    exponential, multiply, result = graph.records
    assert exponential.operands == ({"parameter": 0},)
    assert multiply.operands == ({"trace": 0}, {"constant": digest})
    assert multiply.trace_operands == (0,)
    assert result.operands == ({"tuple": [{"trace": 1}, {"tuple": [{"parameter": 0}, {"constant": digest}]}]},)
    assert result.trace_operands == (1,)


def test_a_reader_of_a_traced_while_loop_names_the_loop_in_its_tail() -> None:
    graph = commitment(Fixture("fori_loop").module_text)
    loops = {r.index for r in graph.records if r.opcode == "while"}
    readers = [
        (r, position)
        for r in graph.records
        for position in r.operands
        if position.get("trace") in loops and position.get("path")
    ]
    assert readers, "fori_loop reads an element of a loop's tuple"
    for record, position in readers:
        assert position["trace"] in record.trace_operands
    # dot(parameter 0, element 2 of loop 0): the tail is loop 0 alone.
    record, position = readers[0]
    assert record.opcode == "dot" and record.operands == ({"parameter": 0}, {"trace": 0, "path": [2]})
    assert record.trace_operands == (0,)
    bound = hashlib.sha256(bytes.fromhex(record.program) + hashlib.sha256(record.to_json_bytes()).digest()).digest()
    assert record.leaf() == bound + (0).to_bytes(4, "big")
    # A record reading two leaves lists them in first appearance order, once each.
    both = next(r for r in graph.records if r.operands == ({"trace": 0, "path": [2]}, {"trace": record.index}))
    assert both.trace_operands == (0, record.index)
    assert both.leaf()[32:] == (0).to_bytes(4, "big") + record.index.to_bytes(4, "big")


# --- format ----------------------------------------------------------------------------------


def test_a_record_is_canonical_json_and_its_leaf_the_digest_and_the_tail() -> None:
    record = GraphRecord(
        index=3,
        name="fusion.12",
        opcode="fusion",
        shape="f32[2,3]",
        operands=({"trace": 1}, {"trace": 0, "path": [1]}, {"trace": 1}, {"parameter": 0}),
        attributes="ab" * 32,
        trace_operands=(1, 0),
    )
    text = (
        b'{"attributes":"' + b"ab" * 32 + b'","format":"vxla.graph-record.v4","index":3,"name":"fusion.12",'
        b'"opcode":"fusion","operands":[{"trace":1},{"path":[1],"trace":0},{"trace":1},{"parameter":0}],'
        b'"shape":"f32[2,3]"}'
    )
    assert record.to_json_bytes() == text
    # The leaf binds the element program's digest (none here) to the record's JSON.
    bound = hashlib.sha256(b"\x00" * 32 + hashlib.sha256(text).digest()).digest()
    assert record.leaf() == bound + b"\x00\x00\x00\x01\x00\x00\x00\x00"
    with_program = dataclasses.replace(record, program="cd" * 32)
    assert with_program.leaf()[:32] == hashlib.sha256(b"\xcd" * 32 + hashlib.sha256(text).digest()).digest()


@pytest.mark.parametrize("name", ["fori_loop", "transformer_block"])
def test_every_record_proves_against_the_graph_root(name: str) -> None:
    graph = commitment(Fixture(name).module_text)
    n = graph.trace_leaves
    assert graph.records[-1].attributes == sha256_hex(b"")
    for record in graph.records:
        proof = graph.proof(record.index)
        assert root_from_commitment_proof(record.leaf(), record.index, n, proof) == graph.root


# --- what the commitment depends on ------------------------------------------------------------


@pytest.mark.parametrize("name", ["fori_loop", "transformer_block", "conditional", "fp8_matmul"])
def test_every_target_commits_to_the_same_graph(name: str) -> None:
    program = load_program(Fixture(name).module_text)
    graphs = {cpu: graph_commitment(program, CONFIG.with_target(cpu=cpu)) for cpu in TARGET_CPUS}
    assert {"x86-64-v3", "x86-64-v4", "neoverse-n1"} <= set(graphs)  # AVX2, AVX-512, aarch64
    assert len({(g.root, g.trace_leaves) for g in graphs.values()}) == 1
    assert all(g.records == graphs["x86-64-v3"].records for g in graphs.values())
    # And the same again from a fresh parse (nothing depends on object identity).
    assert commitment(Fixture(name).module_text).root == graphs["x86-64-v3"].root


def test_names_order_and_metadata_of_the_source_do_not_matter() -> None:
    renamed = """HloModule other, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[4]{0}, f32[4]{0})}
ENTRY main.7 {
  y = f32[4] parameter(1)
  x = f32[4] parameter(0), metadata={op_name="x"}
  s = f32[4] add(x, y)
  ROOT out = (f32[4], f32[4], f32[4]) tuple(y, s, x)
}
"""
    assert commitment(renamed) == commitment(OUTPUT_IS_PARAMETERS)


COMPARE = """HloModule m
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  c = pred[8] compare(p0, p1), direction=LT
  s = f32[8] select(c, p0, p1)
  ROOT e = f32[8] exponential(s)
}
"""

SCALE = """HloModule m
ENTRY e {
  p0 = f32[8] parameter(0)
  k = f32[] constant(2)
  b = f32[8] broadcast(k), dimensions={}
  m = f32[8] multiply(p0, b)
  ROOT t = (f32[8], f32[8]) tuple(m, p0)
}
"""

WEIGHTS = """HloModule m
ENTRY e {
  p0 = f32[2,3] parameter(0)
  w = f32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})
  ROOT d = f32[2,2] dot(p0, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        (COMPARE, "direction=LT", "direction=GT"),
        (SCALE, "constant(2)", "constant(3)"),
        (WEIGHTS, "{5, 6}", "{5, 7}"),
        (Fixture("fori_loop").module_text, "constant(3.7)", "constant(3.75)"),
    ],
)
def test_changing_what_one_instruction_computes_changes_the_commitment(text: str, old: str, new: str) -> None:
    assert text.count(old) == 1
    before, after = commitment(text), commitment(text.replace(old, new))
    assert before.root != after.root
    # The same instructions in the same order: only what they compute, or read, differs.
    assert names_and_opcodes(before) == names_and_opcodes(after)
    changed = [i for i, (a, b) in enumerate(zip(before.records, after.records, strict=True)) if a != b]
    assert changed
    for index in changed:
        a, b = before.records[index], after.records[index]
        assert (a.attributes != b.attributes) or (a.operands != b.operands)


def test_attributes_are_the_function_not_the_operands() -> None:
    swapped = OUTPUT_IS_PARAMETERS.replace("add(p0, p1)", "add(p1, p0)")
    a, b = commitment(OUTPUT_IS_PARAMETERS).records[0], commitment(swapped).records[0]
    assert a.attributes == b.attributes and a.operands != b.operands
    subtracted = commitment(OUTPUT_IS_PARAMETERS.replace("add(p0, p1)", "subtract(p0, p1)")).records[0]
    assert subtracted.operands == a.operands and subtracted.attributes != a.attributes


def test_the_description_names_operands_by_slot_and_callees_locally() -> None:
    module = optimize(load_program(COMPARE), CONFIG)
    fusion = next(i for i in module.entry.execution_order() if i.opcode == "fusion")
    text = describe(module, fusion)
    lines = text.split("\n")
    assert lines[0] == "%computation.0 {"
    assert lines[-1].startswith("f32[8]{0} fusion(%operand.0, %operand.1), calls=%computation.")
    # The fused computation is the canonical printer's, under its local name.
    assert "compare(%parameter.0, %parameter.1), direction=LT" in text
    record = next(r for r in graph_records(module) if r.opcode == "fusion")
    assert record.attributes == sha256_hex(text.encode())
    # The same fusion in a module with another computation before it describes the same.
    bigger = COMPARE.replace(
        "ROOT e = f32[8] exponential(s)",
        "e = f32[8] exponential(s)\n  z = f32[] constant(0)\n  r = f32[] reduce(p1, z), dimensions={0}, to_apply=add\n"
        "  ROOT t = (f32[8], f32[]) tuple(e, r)",
    ).replace("ENTRY e {", "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {")
    other = commit_graph(optimize(load_program(bigger), CONFIG))
    assert record.attributes in {r.attributes for r in other.records}
