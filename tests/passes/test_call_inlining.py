"""Call inlining: calls disappear into their callers, other called computations stay."""

from __future__ import annotations

from compiler.passes.call_inlining import CallInlining
from harness.hlo_fragments import ADD_F32
from tests.passes.simplification_helpers import (
    assert_bit_identical,
    assert_same_result,
    canonical,
    opcodes,
    run_pass,
)

NESTED = """HloModule m
inner {
  a = s32[4] parameter(0)
  b = s32[4] parameter(1)
  ROOT s = s32[4] subtract(a, b)
}
outer {
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  d = s32[4] call(y, x), to_apply=inner
  ROOT m = s32[4] multiply(d, x)
}
ENTRY e {
  p = s32[4] parameter(0)
  q = s32[4] parameter(1)
  c1 = s32[4] call(p, q), to_apply=outer
  c2 = s32[4] call(q, c1), to_apply=outer
  ROOT t = (s32[4], s32[4]) tuple(c1, c2)
}
"""


def test_nested_calls_are_inlined_and_callees_dropped() -> None:
    before, after, changed = run_pass(CallInlining(), NESTED)
    assert changed
    assert len(after.computations) == 1 and after.computations[0] is after.entry
    assert "call" not in opcodes(after)
    assert opcodes(after).count("subtract") == 2 and opcodes(after).count("multiply") == 2
    assert_bit_identical(before, after)


def test_a_callee_returning_its_parameter_forwards_the_operand() -> None:
    text = """HloModule m
id {
  a = f32[3] parameter(0)
  ROOT b = f32[3] parameter(1)
}
ENTRY e {
  p = f32[3] parameter(0)
  q = f32[3] parameter(1)
  c = f32[3] call(p, q), to_apply=id
  ROOT n = f32[3] negate(c)
}
"""
    before, after, changed = run_pass(CallInlining(), text)
    assert changed
    assert opcodes(after) == ["parameter", "parameter", "negate"]
    assert after.entry.root.operands[0] is after.entry.parameters[1]
    assert_bit_identical(before, after)


def test_calls_inside_a_while_body_are_inlined_but_the_loop_stays() -> None:
    text = """HloModule m
step {
  v = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT w = s32[] add(v, one)
}
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[] get-tuple-element(s), index=1
  i2 = s32[] call(i), to_apply=step
  x2 = s32[] multiply(x, i2)
  ROOT r = (s32[], s32[]) tuple(i2, x2)
}
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = s32[] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[]) tuple(z, a)
  ROOT loop = (s32[], s32[]) while(init), condition=cond, body=body
}
"""
    before, after, changed = run_pass(CallInlining(), text)
    assert changed
    assert opcodes(after)[-1] == "while"
    assert [c.name for c in after.computations if c is not after.entry] == ["body", "cond"]
    body = after.computation("body")
    assert "call" not in [i.opcode for i in body.instructions]
    assert_bit_identical(before, after)


def test_fusion_and_reduce_computations_are_not_inlined() -> None:
    text = "HloModule m\n" + ADD_F32 + """fused {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
ENTRY e {
  p = f32[4] parameter(0)
  f = f32[4] fusion(p), kind=kLoop, calls=fused
  z = f32[] constant(0)
  ROOT r = f32[] reduce(f, z), dimensions={0}, to_apply=add
}
"""
    before, after, changed = run_pass(CallInlining(), text)
    assert not changed
    assert canonical(after) == canonical(before)


def test_inlining_is_deterministic_under_renaming_and_reordering() -> None:
    variant = (
        NESTED.replace(
            "c1 = s32[4] call(p, q), to_apply=outer\n  c2 = s32[4] call(q, c1), to_apply=outer",
            "c2 = s32[4] call(q, c1), to_apply=outer\n  c1 = s32[4] call(p, q), to_apply=outer",
        )
        .replace("c1", "first")
        .replace("inner", "sub_fn")
    )
    assert_same_result(CallInlining, NESTED, variant)
