"""The sibling multi-output fusion pass (after loop fusion) on small hand-written modules:
which fusions merge, that the printed text is a fixed point, and that the reference
evaluator's bits do not change."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Computation, Module
from compiler.hlo.printer import canonical_text
from compiler.passes.multi_output_fusion import MultiOutputFusion
from tests.passes.fusion_helpers import SPECIALS, check_with, fused_with


def fused(text: str) -> Module:
    return fused_with(text, MultiOutputFusion())


def check(text: str, *arrays: np.ndarray) -> Module:
    return check_with(text, MultiOutputFusion(), *arrays)


def fusion_results(computation: Computation) -> list[list[str]]:
    """For each fusion, the opcodes of its results (a tuple root's operands)."""
    out = []
    for instruction in computation.execution_order():
        if instruction.opcode == "fusion":
            callee = instruction.attrs["calls"]
            assert isinstance(callee, Computation)
            root = callee.root
            out.append([r.opcode for r in (root.operands if root.opcode == "tuple" else [root])])
    return out


def test_siblings_reading_one_array_merge() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[12]{0} parameter(0)
  y = f32[12]{0} parameter(1)
  a = f32[12]{0} multiply(x, y)
  b = f32[12]{0} negate(a)
  c = f32[12]{0} subtract(x, y)
  d = f32[12]{0} abs(c)
  u = f32[12]{0} add(x, x)
  v = f32[12]{0} sqrt(u)
  ROOT t = (f32[12]{0}, f32[12]{0}, f32[12]{0}) tuple(b, d, v)
}
"""
    module = check(text, SPECIALS, SPECIALS[::-1].copy())
    assert fusion_results(module.entry) == [["negate", "abs", "sqrt"]]
    opcodes = [i.opcode for i in module.entry.execution_order()]
    assert opcodes.count("fusion") == 1 and opcodes.count("get-tuple-element") == 3


def test_dependent_or_different_fusions_stay_apart() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  w = f32[4,4]{1,0} parameter(1)
  a = f32[3,4]{1,0} exponential(x)
  b = f32[3,4]{1,0} negate(a)
  d = f32[3,4]{1,0} dot(b, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[3,4]{1,0} add(d, x)
  e = f32[3,4]{1,0} abs(c)
  tr = f32[4,3]{1,0} transpose(x), dimensions={1,0}
  n = f32[4,3]{1,0} negate(tr)
  s = f32[4,3]{1,0} sqrt(n)
  ROOT t = (f32[3,4]{1,0}, f32[4,3]{1,0}) tuple(e, s)
}
"""
    module = check(text, SPECIALS.reshape(3, 4), np.arange(16, dtype=np.float32).reshape(4, 4))
    # e depends on b through the dot; s has another shape: three separate fusions.
    assert len(fusion_results(module.entry)) == 3


def test_deterministic() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[12]{0} parameter(0)
  a = f32[12]{0} multiply(x, x)
  b = f32[12]{0} negate(a)
  c = f32[12]{0} add(x, x)
  d = f32[12]{0} abs(c)
  ROOT t = (f32[12]{0}, f32[12]{0}) tuple(b, d)
}
"""
    one, two = fused(text), fused(text)
    assert canonical_text(one) == canonical_text(two)
    assert [i.name for i in one.instructions()] == [i.name for i in two.instructions()]


def test_xla_fusions_of_a_variadic_reduce_pass_through_the_pipeline_unchanged_in_value() -> None:
    """XLA's optimized argmax fuses each variadic reduce into a kLoop fusion whose root makes
    the tuple itself: the default pipeline takes the module (it once failed an assertion on
    it) and computes the same bits as the module as written."""
    from compiler.config import load_config
    from compiler.hlo import load_module
    from compiler.passes.pipeline import pipeline_named
    from compiler.reference import evaluate
    from harness.fixture_data import Fixture

    fixture = Fixture("argmax")
    module = load_module((fixture.directory / "xla_optimized.hlo").read_text())
    optimized = pipeline_named(load_config().pipeline).run(load_module(canonical_text(module)))
    arrays = fixture.inputs()
    for got, want in zip(evaluate(optimized, arrays), evaluate(module, arrays), strict=True):
        assert got.tobytes() == want.tobytes()
