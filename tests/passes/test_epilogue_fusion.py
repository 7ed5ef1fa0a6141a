"""The dot epilogue fusion pass (after loop fusion) on small hand-written modules: which
kOutput fusions it forms, that the printed text is a fixed point, and that the reference
evaluator's bits do not change."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Module
from compiler.hlo.printer import canonical_text
from compiler.passes.epilogue_fusion import EpilogueFusion
from tests.passes.fusion_helpers import SPECIALS, check_with, fused_with, kinds


def fused(text: str) -> Module:
    return fused_with(text, EpilogueFusion())


def check(text: str, *arrays: np.ndarray) -> Module:
    return check_with(text, EpilogueFusion(), *arrays)


def test_bias_and_activation_fuse_into_the_dot() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  w = f32[4,2]{1,0} parameter(1)
  b = f32[2]{0} parameter(2)
  d = f32[3,2]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[3,2]{1,0} broadcast(b), dimensions={1}
  a = f32[3,2]{1,0} add(d, bb)
  ROOT t = f32[3,2]{1,0} tanh(a)
}
"""
    module = check(text, SPECIALS.reshape(3, 4), SPECIALS[:8].reshape(4, 2), SPECIALS[8:10].copy())
    assert kinds(module.entry) == [("kOutput", ["dot", "broadcast", "add", "tanh"])]


def test_dots_that_must_stay_apart() -> None:
    """Read moved (transposed), read twice, and an f16 dot (rounded in a separate step)."""
    text = """HloModule m
ENTRY e {
  x = f32[3,3]{1,0} parameter(0)
  h = f16[3,3]{1,0} parameter(1)
  d = f32[3,3]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[3,3]{1,0} transpose(d), dimensions={1,0}
  n = f32[3,3]{1,0} negate(t)
  d2 = f32[3,3]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  a2 = f32[3,3]{1,0} abs(d2)
  s2 = f32[3,3]{1,0} add(d2, a2)
  dh = f16[3,3]{1,0} dot(h, h), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  nh = f16[3,3]{1,0} negate(dh)
  ah = f16[3,3]{1,0} abs(nh)
  ROOT r = (f32[3,3]{1,0}, f32[3,3]{1,0}, f16[3,3]{1,0}, f32[3,3]{1,0}) tuple(n, s2, ah, a2)
}
"""
    module = check(text, SPECIALS[:9].reshape(3, 3), SPECIALS[:9].reshape(3, 3).astype(np.float16))
    assert "kOutput" not in [kind for kind, _ in kinds(module.entry)]


def test_deterministic() -> None:
    text = """HloModule m
ENTRY e {
  x = s32[2,3,4]{2,1,0} parameter(0)
  d = s32[2,3,3]{2,1,0} dot(x, x), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  n = s32[2,3,3]{2,1,0} negate(d)
  ROOT m = s32[2,3,3]{2,1,0} multiply(n, d)
}
"""
    one, two = fused(text), fused(text)
    assert canonical_text(one) == canonical_text(two)
    assert [i.name for i in one.instructions()] == [i.name for i in two.instructions()]
    module = check(text, np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4) * 99991)
    assert kinds(module.entry) == [("kOutput", ["dot", "negate", "multiply"])]
