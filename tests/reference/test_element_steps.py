"""The steps of one element (compiler/reference/steps/) against the reference evaluator: a
sample of the fixtures (tools/element_steps.py runs every fixture), the math functions on
their special and random operands, hand-written modules for the index arithmetic of padding,
windows, dilations, groups and blocks, and the element program's independence of the element
and of the operand values."""

from __future__ import annotations

import numpy as np
import pytest

from attest.digests import tensor_digest
from attest.merkle import InclusionProof, inclusion_proof, root_from_proof, verify_inclusion
from attest.tensor_proof import element_proof, verify_element_proof
from compiler.api import evaluate, load_config, load_program, optimize, trace_leaves
from compiler.hlo import load_module
from compiler.numerics import mathlib
from compiler.numerics.mathlib.f32_exceptions import F32_EXCEPTIONS
from compiler.reference.scalar import Op, to_bits
from compiler.reference.steps import StepKind, Uncovered, element_steps
from compiler.reference.steps.mathlib import binary_function, unary_function
from compiler.reference.steps.program import (
    PROGRAM_LEAF_BYTES,
    decode_program_leaf,
    recompute_step,
    table_entry_proof,
)
from compiler.reference.steps.record import Recorder
from core.dtypes import F32, F64
from harness.element_steps import StepsReport, check_module
from harness.fixture_data import Fixture

SPECIALS = [
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    5e-324,
    -1e-310,
    1e-40,
    1.0,
    -1.0,
    0.5,
    19.5,
    -20.0,
    88.7,
    -745.2,
    1e300,
    3.4e38,
    1e22,
]


def _assert_clean(report: StepsReport) -> None:
    assert not report.failures, "\n".join(report.failures[:10])
    assert sum(s["elements"] for s in report.stats.values()) > 0


@pytest.mark.parametrize(
    "name",
    ["transformer_block", "cnn", "integer_arith", "f16_bf16", "special_values", "depthwise_conv"],
)
def test_fixture_elements_are_their_steps(name: str) -> None:
    fixture = Fixture(name)
    module = optimize(load_program(fixture.module_text), load_config())
    report = StepsReport()
    check_module(
        module, fixture.inputs(), 3, np.random.default_rng(7), report, label=name, max_steps=20_000
    )
    _assert_clean(report)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_functions_steps_give_the_reference(dtype) -> None:
    rng = np.random.default_rng(3)
    with np.errstate(over="ignore"):
        xs = np.concatenate(
            [np.array(SPECIALS, dtype), (rng.standard_normal(6) * 30).astype(dtype)]
        )
    F = F32 if dtype == np.float32 else F64
    for name in mathlib.UNARY_FUNCTIONS:
        expected = mathlib.unary(name, xs)
        for x, want in zip(xs, expected, strict=True):
            rec = Recorder([np.array([x])])
            y = unary_function(rec, name, _load(rec, F))
            assert rec.bits(y) == to_bits(np.array([want]), F), (name, x)
    ys = xs[::-1].copy()
    for name in ("power", "atan2"):
        expected = getattr(mathlib, name)(xs, ys)
        for x, y, want in zip(xs, ys, expected, strict=True):
            rec = Recorder([np.array([x]), np.array([y])])
            zero = rec.element(0)
            out = binary_function(rec, name, rec.load(0, zero, F), rec.load(1, zero, F))
            assert rec.bits(out) == to_bits(np.array([want]), F), (name, x, y)


def _load(rec: Recorder, dtype) -> int:
    return rec.load(0, rec.element(0), dtype)


def test_a_math_function_has_one_program_for_every_operand() -> None:
    programs = set()
    for x in (0.0, np.nan, 1e-300, 3.0, -700.0, 1e300):
        rec = Recorder([np.array([x])])
        unary_function(rec, "tanh", _load(rec, F64))
        programs.add(tuple(s.template() for s in rec.steps))
    assert len(programs) == 1


def test_the_f32_rounding_near_a_boundary_is_left_undecided_with_the_reference_value() -> None:
    """RN32 of the binary64 algorithm is wrong on the exceptions' inputs: the machine cannot
    decide them, the step keeps the correctly rounded value and says so."""
    bits, correct = F32_EXCEPTIONS["log"][0]
    rec = Recorder([np.array([bits], dtype=np.uint32).view(np.float32)])
    y = unary_function(rec, "log", _load(rec, F32))
    assert rec.bits(y) == correct
    last = rec.steps[y]
    assert last.op is Op.ROUND_F32_CR and not last.decided
    # Elsewhere the same program decides.
    rec = Recorder([np.array([2.0], dtype=np.float32)])
    assert rec.steps[unary_function(rec, "log", _load(rec, F32))].decided


INDEX_MODULE = """
HloModule index_arithmetic

add_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
max_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }

ENTRY e {
  x = f32[3,5] parameter(0)
  k = f32[2,2,4,3] parameter(1)
  img = f32[1,6,5,4] parameter(2)
  long = f32[2,4100] parameter(3)
  i = s32[] parameter(4)
  q = s4[8] parameter(5)
  bf = bf16[8] parameter(6)
  c = c64[4] parameter(7)
  zero = f32[] constant(0)
  p = f32[8,11] pad(x, zero), padding=-1_2_2x1_1_1
  w = f32[3,5] reduce-window(x, zero), window={size=2x3 stride=2x1 pad=1_1x0_2 lhs_dilate=2x1}, to_apply=max_f32
  cv = f32[1,3,10,3] convolution(img, k), window={size=2x2 stride=2x1 pad=1_1x1_1 lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  r = f32[2] reduce(long, zero), dimensions={1}, to_apply=add_f32
  d = f32[2,5] dynamic-slice(x, i, i), dynamic_slice_sizes={2,5}
  t = f32[5,3] transpose(x), dimensions={1,0}
  cat = f32[5,6] concatenate(t, t), dimensions={1}
  rev = f32[3,5] reverse(x), dimensions={0,1}
  sl = f32[2,2] slice(x), slice={[0:3:2], [1:5:3]}
  qd = s4[8] divide(q, q)
  qs = s4[8] shift-right-arithmetic(q, q)
  bt = bf16[8] tanh(bf)
  cm = c64[4] multiply(c, c)
  tot = pred[3,5] compare(x, rev), direction=LT, type=TOTALORDER
  ROOT out = (f32[8,11], f32[3,5], f32[1,3,10,3], f32[2], f32[2,5], f32[5,6], f32[2,2], s4[8], s4[8], bf16[8], c64[4], pred[3,5]) tuple(p, w, cv, r, d, cat, sl, qd, qs, bt, cm, tot)
}
"""


def _index_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    import ml_dtypes

    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[0, 0], x[1, 1] = np.nan, -0.0
    return [
        x,
        rng.standard_normal((2, 2, 4, 3)).astype(np.float32),
        rng.standard_normal((1, 6, 5, 4)).astype(np.float32),
        rng.standard_normal((2, 4100)).astype(np.float32),
        np.array(7, np.int32),  # out of range: clamped
        rng.integers(-8, 8, 8).astype(np.int8),
        rng.standard_normal(8).astype(ml_dtypes.bfloat16),
        (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64),
    ]


def test_index_arithmetic_of_padding_windows_dilations_and_blocks() -> None:
    module = load_module(INDEX_MODULE)
    report = StepsReport()
    check_module(
        module,
        _index_inputs(np.random.default_rng(5)),
        6,
        np.random.default_rng(1),
        report,
        label="index",
    )
    _assert_clean(report)
    assert not report.uncovered, report.uncovered
    for opcode in (
        "pad",
        "reduce-window",
        "convolution",
        "reduce",
        "dynamic-slice",
        "concatenate",
        "slice",
        "divide",
        "tanh",
        "multiply",
        "compare",
    ):
        assert report.stats[opcode]["elements"] > 0, opcode


def _every_element(text: str, inputs: list[np.ndarray], opcode: str) -> int:
    """Checks every element (up to 32 per leaf) of a hand-written module's leaves: each is
    its steps' result, one program per leaf, nothing uncovered. Returns how many elements of
    `opcode` were checked."""
    report = StepsReport()
    check_module(load_module(text), inputs, 32, np.random.default_rng(2), report, label=opcode)
    _assert_clean(report)
    assert not report.uncovered, report.uncovered
    return report.stats[opcode]["elements"]


GATHER_MODULE = """
HloModule gathers
ENTRY e {
  table = f32[5,3] parameter(0)
  rows = s32[4] parameter(1)
  x = f32[6,4] parameter(2)
  far = u64[3,1] parameter(3)
  y = f32[4,5] parameter(4)
  pairs = s8[2,3] parameter(5)
  z = f32[2,5,3] parameter(6)
  per = s32[2,4,1] parameter(7)
  embed = f32[4,3] gather(table, rows), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  blocks = f32[3,2,4] gather(x, far), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,4}
  swapped = f32[3,2] gather(y, pairs), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={1,0}, index_vector_dim=0, slice_sizes={1,2}
  batched = f32[2,4,3] gather(z, per), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,3}
  ROOT out = (f32[4,3], f32[3,2,4], f32[3,2], f32[2,4,3]) tuple(embed, blocks, swapped, batched)
}
"""


def test_a_gathered_element_is_its_loaded_clamped_index_and_the_operand_element() -> None:
    """Every element of gathers with negative and out-of-range indices (clamped), u64 indices
    past the s64 range, an index vector across dimension 0 in swapped order, and batching
    dimensions."""
    rng = np.random.default_rng(11)
    inputs = [
        rng.standard_normal((5, 3)).astype(np.float32),
        np.array([2, -2, 7, 4], np.int32),
        rng.standard_normal((6, 4)).astype(np.float32),
        np.array([[1], [2**64 - 1], [2**63 + 5]], np.uint64),
        rng.standard_normal((4, 5)).astype(np.float32),
        np.array([[1, -100, 4], [3, 0, 127]], np.int8),
        rng.standard_normal((2, 5, 3)).astype(np.float32),
        np.array([[[0], [4], [9], [-1]], [[2], [3], [1], [5]]], np.int32),
    ]
    assert _every_element(GATHER_MODULE, inputs, "gather") == 12 + 24 + 6 + 24


BITCAST_MODULE = """
HloModule bitcasts
ENTRY e {
  words = u32[3,2] parameter(0)
  halves = f16[5,4] parameter(1)
  wide = f64[3] parameter(2)
  bytes = s8[2,8] parameter(3)
  state = u64[3] bitcast-convert(words)
  packed = s64[5] bitcast-convert(halves)
  split = u16[3,4] bitcast-convert(wide)
  f = f64[2] bitcast-convert(bytes)
  halved = bf16[3,2,2] bitcast-convert(words)
  ROOT out = (u64[3], s64[5], u16[3,4], f64[2], bf16[3,2,2]) tuple(state, packed, split, f, halved)
}
"""


def test_a_bitcast_between_widths_is_its_pieces_shifted_and_joined() -> None:
    """Every element of bitcast-converts to a wider type (pieces least significant first:
    u32 pairs to u64, f16 quads to s64, s8 octets to f64) and to a narrower one (f64 to u16
    pieces, u32 to bf16 halves), on values with every bit pattern's corners."""
    rng = np.random.default_rng(4)
    words = rng.integers(0, 2**32, (3, 2), dtype=np.uint64).astype(np.uint32)
    words[0] = [0xFFFFFFFF, 0x80000000]
    halves = rng.standard_normal((5, 4)).astype(np.float16)
    halves[0] = [np.nan, -0.0, np.inf, 6e-8]
    wide = np.array([np.nan, -1.5e300, 5e-324])
    data = rng.integers(-128, 128, (2, 8)).astype(np.int8)
    assert _every_element(BITCAST_MODULE, [words, halves, wide, data], "bitcast-convert") == 3 + 5 + 12 + 2 + 12


SCATTER_MODULE = """
HloModule scatters
replace { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] copy(b) }
minus { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] subtract(a, b) }
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }
ENTRY e {
  x = f32[6] parameter(0)
  at = s32[5,1] parameter(1)
  v = f32[5] parameter(2)
  m = f32[5,4] parameter(3)
  corners = u64[3,2] parameter(4)
  r = f32[3,2] parameter(5)
  t = s32[2,3] parameter(6)
  per = s32[2,2,1] parameter(7)
  w = s32[2,2] parameter(8)
  last = f32[6] scatter(x, at, v), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=replace
  windows = f32[5,4] scatter(m, corners, r), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=minus
  batched = s32[2,3] scatter(t, per, w), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add
  ROOT out = (f32[6], f32[5,4], s32[2,3]) tuple(last, windows, batched)
}
"""


def test_a_scattered_element_is_every_covering_update_in_order() -> None:
    """Every element of scatters where order decides (a replacing combiner with repeated
    indices: the last update wins; a subtracting one over windows of two), out-of-bounds
    updates (skipped whole: a negative index, one past the end, a window whose second element
    is past the end, a u64 index past s64), and batching dimensions."""
    rng = np.random.default_rng(6)
    inputs = [
        rng.standard_normal(6).astype(np.float32),
        np.array([[2], [4], [2], [-1], [6]], np.int32),
        rng.standard_normal(5).astype(np.float32),
        rng.standard_normal((5, 4)).astype(np.float32),
        np.array([[1, 2], [4, 3], [2**64 - 1, 0]], np.uint64),
        rng.standard_normal((3, 2)).astype(np.float32),
        rng.integers(-9, 9, (2, 3)).astype(np.int32),
        np.array([[[0], [0]], [[2], [3]]], np.int32),
        rng.integers(-9, 9, (2, 2)).astype(np.int32),
    ]
    assert _every_element(SCATTER_MODULE, inputs, "scatter") == 6 + 20 + 6


def test_an_element_program_does_not_depend_on_the_element_or_the_values() -> None:
    module = load_module(INDEX_MODULE)
    conv = next(i for i in module.entry.instructions if i.opcode == "convolution")
    programs = set()
    for seed, element in ((1, 0), (2, 17), (3, 89)):
        inputs = _index_inputs(np.random.default_rng(seed))
        trace = element_steps(conv, [inputs[2], inputs[1]], element)
        programs.add(trace.program)
        assert any(s.kind is StepKind.ELEMENT for s in trace.steps)
    assert len(programs) == 1


def test_what_is_not_covered_is_named() -> None:
    module = load_module(
        """
HloModule s
ENTRY e {
  x = f32[4] parameter(0)
  ROOT s = f32[4] sort(x), dimensions={0}, to_apply=lt
}
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = pred[] compare(a, b), direction=LT }
"""
    )
    with pytest.raises(Uncovered, match="sort"):
        element_steps(module.entry.root, [np.zeros(4, np.float32)], 0)
    conv = next(
        i for i in load_module(INDEX_MODULE).entry.instructions if i.opcode == "convolution"
    )
    inputs = _index_inputs(np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside"):
        element_steps(conv, [inputs[2], inputs[1]], 90)


def test_every_step_recomputes_from_its_program_leaf_and_proved_inputs() -> None:
    """What the contract does with the one step a dispute narrows to, for every step of an
    element of each leaf: decode the template, prove a LOAD's element against the operand's
    (or literal's) digest and a TABLE's entry against the table root, recompute the rest."""
    fixture = Fixture("transcendentals")
    module = optimize(load_program(fixture.module_text), load_config())
    values: dict[int, object] = {}
    evaluate(
        module,
        fixture.inputs(),
        observer=lambda instruction, value: values.__setitem__(id(instruction), value),
    )
    checked = set()
    for leaf in trace_leaves(module)[:6]:
        operands = [np.asarray(values[id(o)]) for o in leaf.operands]
        trace = element_steps(leaf, operands, 1)
        leaves = trace.program_leaves()
        root = trace.commitment().root
        for index, (step, leaf_bytes) in enumerate(zip(trace.steps, leaves, strict=True)):
            assert verify_inclusion(leaf_bytes, inclusion_proof(leaves, index), root)
            template = decode_program_leaf(leaf_bytes)
            arguments = [trace.steps[a].value for a in template.args]
            loaded = None
            if template.kind is StepKind.LOAD:
                array = (
                    operands[template.number]
                    if template.source == 1
                    else trace.literals[template.number]
                )
                digest = tensor_digest(array) if template.source == 1 else template.immediate.hex()
                proof = element_proof(array, arguments[0])
                loaded = int.from_bytes(verify_element_proof(digest, proof), "little")
            elif template.kind is StepKind.TABLE:
                table = dict(trace.tables)[step.table]
                entry, siblings = table_entry_proof(table, arguments[0])
                assert template.size == len(table)
                proof = InclusionProof(
                    index=arguments[0], leaf_count=len(table), siblings=tuple(siblings)
                )
                assert root_from_proof(entry, proof) == template.immediate.hex()
                loaded = int.from_bytes(entry, "big")
            if step.decided:
                assert recompute_step(template, arguments, 1, loaded) == step.value, step.describe()
            checked.add(template.kind)
    assert checked == {StepKind.ELEMENT, StepKind.CONST, StepKind.LOAD, StepKind.TABLE, StepKind.OP}


def test_one_program_commitment_per_leaf_and_one_values_root_per_element() -> None:
    module = load_module(INDEX_MODULE)
    conv = next(i for i in module.entry.instructions if i.opcode == "convolution")
    inputs = _index_inputs(np.random.default_rng(2))
    traces = [element_steps(conv, [inputs[2], inputs[1]], e) for e in (0, 44)]
    assert traces[0].commitment() == traces[1].commitment()
    assert traces[0].values_root() != traces[1].values_root()
    assert all(len(leaf) == PROGRAM_LEAF_BYTES for leaf in traces[0].program_leaves())


def test_every_opcode_is_covered_or_named_with_its_reason() -> None:
    from compiler.hlo.opcodes import SUPPORTED
    from compiler.reference.steps import UNCOVERED, covered_opcodes

    assert set(SUPPORTED) == covered_opcodes() | set(UNCOVERED)
    assert not covered_opcodes() & set(UNCOVERED)
    assert all(len(why) > 10 for why in UNCOVERED.values())


def test_the_docs_name_every_uncovered_opcode() -> None:
    from pathlib import Path

    from compiler.reference.steps import UNCOVERED

    text = (Path(__file__).resolve().parents[2] / "docs" / "disputes.md").read_text()
    section = text.split("### What the contract cannot evaluate", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{opcode}`" in section for opcode in UNCOVERED)
