"""The reduction input fusion pass (after loop fusion) on small hand-written modules: which
kInput fusions it forms, that the printed text is a fixed point, and that the reference
evaluator's bits do not change."""

from __future__ import annotations

import numpy as np

from compiler.hlo import load_module
from compiler.hlo.ir import Computation, Module
from compiler.hlo.printer import canonical_text
from compiler.hlo.verifier import verify_module
from compiler.passes.input_fusion import InputFusion
from compiler.passes.loop_fusion import LoopFusion
from compiler.reference import evaluate

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3.5, 2.0, 7.25, -1e30, 3.0, 0.5], dtype=np.float32)


def fused(text: str) -> Module:
    module = load_module(text)
    LoopFusion().run(module)
    InputFusion().run(module)
    verify_module(module)
    return module


def check(text: str, *arrays: np.ndarray) -> Module:
    before = evaluate(load_module(text), list(arrays))
    module = fused(text)
    printed = canonical_text(module)
    assert canonical_text(load_module(printed)) == printed
    after = evaluate(load_module(printed), list(arrays))
    for got, want in zip(after, before, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    return module


def kinds(computation: Computation) -> list[tuple[str, list[str]]]:
    out = []
    for instruction in computation.execution_order():
        if instruction.opcode == "fusion":
            callee = instruction.attrs["calls"]
            assert isinstance(callee, Computation)
            out.append((str(instruction.attrs["kind"]), [i.opcode for i in callee.execution_order() if i.opcode != "parameter"]))
    return out


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
