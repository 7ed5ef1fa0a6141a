"""Constant folding: instructions of constants become constants with the bits the reference
evaluator computes; large results, broadcasts, iotas and control flow are left alone."""

from __future__ import annotations

import numpy as np

from compiler.passes.constant_folding import MAX_ELEMENTS, ConstantFolding
from compiler.passes.dead_code_elimination import DeadCodeElimination
from harness.hlo_fragments import ADD_F32
from tests.passes.simplification_helpers import (
    assert_bit_identical,
    assert_same_result,
    canonical,
    opcodes,
    run_pass,
)

CHAIN = "HloModule m\n" + ADD_F32 + """ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({1.5, -0, inf, 3e-45})
  d = f32[4] constant({-1.5, 0, -inf, 1e38})
  s = f32[4] add(c, d)
  m = f32[4] multiply(s, d)
  x = f32[4] exponential(m)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=add
  b = f32[4] broadcast(r), dimensions={}
  i = s32[4] constant({-2147483648, 2147483647, 7, -1})
  j = s32[4] constant({-1, 1, 0, 0})
  q = s32[4] divide(i, j)
  k = f32[4] convert(q)
  u = f32[4] add(b, k)
  ROOT o = f32[4] add(p, u)
}
"""


def test_chains_of_constant_ops_fold_to_the_reference_bits() -> None:
    before, after, changed = run_pass(ConstantFolding(), CHAIN)
    assert changed
    DeadCodeElimination().run(after)
    # The broadcast of the folded scalar stays a broadcast; everything else is constant.
    assert opcodes(after) == ["parameter", "constant", "broadcast", "constant", "add", "add"]
    folded = [
        i for i in after.entry.instructions if i.opcode == "constant" and i.array_shape.rank == 1
    ]
    # s32 INT_MIN / -1 = INT_MIN and x / 0 = -1 under the contract, converted exactly.
    assert (
        folded[0].literal.view(np.uint32).tolist()
        == np.array([-2147483648, 2147483647, -1, -1], np.float32).view(np.uint32).tolist()
    )
    assert_bit_identical(before, after)


def test_nan_results_fold_to_the_canonical_nan() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[2] constant({inf, 0})
  b = f32[2] constant({-inf, 0})
  s = f32[2] add(a, b)
  d = f32[2] divide(b, a)
  ROOT t = (f32[2], f32[2]) tuple(s, d)
}
"""
    before, after, changed = run_pass(ConstantFolding(), text)
    assert changed
    assert all(op.opcode == "constant" for op in after.entry.root.operands)
    assert after.entry.root.operands[0].literal.view(np.uint32).tolist() == [0x7FC00000, 0]
    assert after.entry.root.operands[1].literal.view(np.uint32).tolist() == [0x7FC00000, 0x7FC00000]
    assert_bit_identical(before, after, [])


def test_a_nan_with_a_payload_is_not_folded() -> None:
    text = """HloModule m
ENTRY e {
  i = u32[2] constant({2143289345, 4290772992})
  ROOT f = f32[2] bitcast-convert(i)
}
"""
    before, after, changed = run_pass(ConstantFolding(), text)
    assert not changed
    assert opcodes(after) == ["constant", "bitcast-convert"]


def test_broadcast_iota_control_flow_and_large_results_stay() -> None:
    text = f"""HloModule m
double {{
  v = f32[] parameter(0)
  ROOT w = f32[] add(v, v)
}}
ENTRY e {{
  c = f32[] constant(2)
  b = f32[8] broadcast(c), dimensions={{}}
  i = s32[8] iota(), iota_dimension=0
  k = f32[] call(c), to_apply=double
  z = f32[] constant(0)
  one = f32[1] constant({{2}})
  big = f32[{MAX_ELEMENTS + 1}] pad(one, z), padding=0_{MAX_ELEMENTS}
  grow = f32[4] pad(one, z), padding=1_2
  ROOT t = (f32[8], s32[8], f32[], f32[{MAX_ELEMENTS + 1}], f32[4]) tuple(b, i, k, big, grow)
}}
"""
    before, after, changed = run_pass(ConstantFolding(), text)
    assert not changed
    assert canonical(after) == canonical(before)


def test_deterministic_under_renaming_and_reordering() -> None:
    variant = CHAIN.replace(
        "  i = s32[4] constant({-2147483648, 2147483647, 7, -1})\n  j = s32[4] constant({-1, 1, 0, 0})\n",
        "",
    ).replace(
        "  p = f32[4] parameter(0)\n",
        "  p = f32[4] parameter(0)\n  j = s32[4] constant({-1, 1, 0, 0})\n  i = s32[4] constant({-2147483648, 2147483647, 7, -1})\n",
    )
    variant = variant.replace("m = ", "product = ").replace("(m)", "(product)")
    assert_same_result(ConstantFolding, CHAIN, variant)
