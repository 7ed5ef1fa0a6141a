"""CSE: identical instructions merge; anything that differs (operands, attributes, literal
bits, shapes and layouts, called computations) keeps them apart."""

from __future__ import annotations

from compiler.passes.common_subexpression_elimination import CommonSubexpressionElimination
from harness.hlo_fragments import ADD_F32, scalar_binary
from tests.passes.simplification_helpers import (
    assert_bit_identical,
    assert_same_result,
    opcodes,
    run_pass,
)

# add_again is add under another name: a reduce calling it merges with one calling add.
TEXT = "HloModule m\n" + ADD_F32 + scalar_binary("add_again", "f32", "add") + """ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  e1 = f32[4] exponential(p)
  e2 = f32[4] exponential(p)
  m1 = f32[4] multiply(e1, q)
  m2 = f32[4] multiply(e2, q)
  m3 = f32[4] multiply(q, e2)
  z1 = f32[] constant(0)
  z2 = f32[] constant(0)
  z3 = f32[] constant(-0)
  r1 = f32[] reduce(m1, z1), dimensions={0}, to_apply=add
  r2 = f32[] reduce(m2, z2), dimensions={0}, to_apply=add
  r3 = f32[] reduce(m2, z3), dimensions={0}, to_apply=add
  r4 = f32[] reduce(m2, z2), dimensions={0}, to_apply=add_again
  c1 = pred[4] compare(p, q), direction=LT
  c2 = pred[4] compare(p, q), direction=GT
  ROOT t = (f32[], f32[], f32[], f32[], f32[4], pred[4], pred[4]) tuple(r1, r2, r3, r4, m3, c1, c2)
}
"""


def test_identical_instructions_merge_and_different_ones_do_not() -> None:
    before, after, changed = run_pass(CommonSubexpressionElimination(), TEXT)
    assert changed
    ops = opcodes(after)
    assert ops.count("exponential") == 1
    # m1 and m2 merge; m3 has its operands the other way round.
    assert ops.count("multiply") == 2
    # 0 and -0 have different bits; add_again is the same computation as add.
    assert ops.count("constant") == 2
    assert ops.count("reduce") == 2
    assert ops.count("compare") == 2
    root = after.entry.root
    assert root.operands[0] is root.operands[1]
    assert root.operands[2] is not root.operands[0] and root.operands[3] is root.operands[0]
    assert_bit_identical(before, after)


def test_layouts_and_shapes_keep_instructions_apart() -> None:
    text = """HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  a = f32[2,3]{1,0} negate(p)
  b = f32[2,3]{0,1} negate(p)
  x = f32[6] bitcast(a)
  y = f32[6] bitcast(b)
  ROOT t = (f32[6], f32[6]) tuple(x, y)
}
"""
    before, after, changed = run_pass(CommonSubexpressionElimination(), text)
    assert not changed
    assert_bit_identical(before, after)


def test_chains_merge_in_one_run_and_a_second_run_is_a_no_op() -> None:
    text = """HloModule m
ENTRY e {
  p = s32[3] parameter(0)
  a1 = s32[3] add(p, p)
  b1 = s32[3] multiply(a1, p)
  a2 = s32[3] add(p, p)
  b2 = s32[3] multiply(a2, p)
  ROOT s = s32[3] subtract(b1, b2)
}
"""
    before, after, changed = run_pass(CommonSubexpressionElimination(), text)
    assert changed
    assert opcodes(after) == ["parameter", "add", "multiply", "subtract"]
    assert not CommonSubexpressionElimination().run(after)
    assert_bit_identical(before, after)


def test_deterministic_under_renaming_and_reordering() -> None:
    variant = TEXT.replace(
        "  e1 = f32[4] exponential(p)\n  e2 = f32[4] exponential(p)\n",
        "  e2 = f32[4] exponential(p)\n  e1 = f32[4] exponential(p)\n",
    )
    variant = variant.replace("r1", "first_reduce").replace("m2", "product")
    assert_same_result(CommonSubexpressionElimination, TEXT, variant)


REDUCERS = (
    "HloModule m\n"
    + scalar_binary("add_a", "f32", "add")
    + scalar_binary("add_b", "f32", "add", lhs="x", rhs="y", root="z")
    + """add_swapped {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT z = f32[] add(y, x)
}
outer_a {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add_a
}
outer_b {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add_b
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add_a
  r2 = f32[] reduce(p, z), dimensions={0}, to_apply=add_b
  r3 = f32[] reduce(p, z), dimensions={0}, to_apply=add_swapped
  c1 = f32[] call(p), to_apply=outer_a
  c2 = f32[] call(p), to_apply=outer_b
  ROOT t = (f32[], f32[], f32[], f32[], f32[]) tuple(r1, r2, r3, c1, c2)
}
"""
)


def test_identical_computations_merge_so_their_callers_can() -> None:
    before, after, changed = run_pass(CommonSubexpressionElimination(), REDUCERS)
    assert changed
    # add_b is add_a; outer_b (after that) is outer_a; add(y, x) is a different computation.
    assert [c.name for c in after.computations] == ["add_a", "add_swapped", "outer_a", "e"]
    root = after.entry.root
    assert root.operands[0] is root.operands[1] and root.operands[3] is root.operands[4]
    assert root.operands[2] is not root.operands[0]
    assert_bit_identical(before, after)
