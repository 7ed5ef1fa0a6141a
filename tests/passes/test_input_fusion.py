"""The reduction input fusion pass (after loop fusion) on small hand-written modules: which
kInput fusions it forms, that the printed text is a fixed point, and that the reference
evaluator's bits do not change."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Module
from compiler.passes.input_fusion import InputFusion
from tests.passes.fusion_helpers import SPECIALS, check_with, fused_with, kinds


def fused(text: str) -> Module:
    return fused_with(text, InputFusion())


def check(text: str, *arrays: np.ndarray) -> Module:
    return check_with(text, InputFusion(), *arrays)


REDUCER = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def test_reduce_of_a_chain_becomes_one_input_fusion() -> None:
    text = f"""HloModule m
{REDUCER}
ENTRY e {{
  x = f32[3,4]{{1,0}} parameter(0)
  y = f32[3,4]{{1,0}} parameter(1)
  m = f32[3,4]{{1,0}} multiply(x, y)
  a = f32[3,4]{{1,0}} abs(m)
  z = f32[] constant(0)
  r = f32[3]{{0}} reduce(a, z), dimensions={{1}}, to_apply=add
  ROOT n = f32[3]{{0}} negate(r)
}}
"""
    module = check(text, SPECIALS.reshape(3, 4), SPECIALS[::-1].reshape(3, 4).copy())
    assert [i.opcode for i in module.entry.execution_order()] == ["parameter", "parameter", "fusion", "negate"]
    assert kinds(module.entry) == [("kInput", ["multiply", "abs", "constant", "reduce"])]


def test_single_producer_and_variadic_reduce() -> None:
    text = """HloModule m
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GE
  v = f32[] select(gt, a, b)
  k = s32[] select(gt, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  n = f32[3,4]{1,0} negate(x)
  io = s32[3,4]{1,0} iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3]{0}, s32[3]{0}) reduce(n, io, lo, zero), dimensions={1}, to_apply=argmax
}
"""
    module = check(text, SPECIALS.reshape(3, 4))
    assert kinds(module.entry) == [("kInput", ["negate", "iota", "constant", "constant", "reduce"])]


def test_shared_producer_is_not_fused() -> None:
    text = f"""HloModule m
{REDUCER}
ENTRY e {{
  x = f32[12]{{0}} parameter(0)
  a = f32[12]{{0}} exponential(x)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={{0}}, to_apply=add
  b = f32[12]{{0}} broadcast(r), dimensions={{}}
  ROOT d = f32[12]{{0}} divide(a, b)
}}
"""
    module = check(text, SPECIALS)
    # exp feeds the reduce and the division: computed once, into a buffer.
    assert [k for k, _ in kinds(module.entry)] == ["kLoop"]
    assert "reduce" in [i.opcode for i in module.entry.execution_order()]


def test_deterministic_names() -> None:
    text = f"""HloModule m
{REDUCER}
ENTRY e {{
  x = f32[3,4]{{1,0}} parameter(0)
  t = f32[4,3]{{1,0}} transpose(x), dimensions={{1,0}}
  s = f32[4,3]{{1,0}} sqrt(t)
  z = f32[] constant(0)
  ROOT r = f32[3]{{0}} reduce(s, z), dimensions={{0}}, to_apply=add
}}
"""
    one, two = fused(text), fused(text)
    assert [c.name for c in one.computations] == [c.name for c in two.computations]
    assert [i.name for i in one.instructions()] == [i.name for i in two.instructions()]
    assert kinds(check(text, SPECIALS.reshape(3, 4)).entry) == [("kInput", ["transpose", "sqrt", "constant", "reduce"])]
