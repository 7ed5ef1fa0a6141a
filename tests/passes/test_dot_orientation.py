"""Dot orientation (compiler/passes/dot_orientation.py): a dot of a narrow rhs and a tall lhs
computes the transposed product, with the same bits as the reference's dot on every target
and thread count, NaNs, infinities, signed zeros and overflowing products included; other
dots stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.passes.dot_orientation import better_swapped
from harness.targets import run_everywhere
from tests.passes.simplification_helpers import instructions_of, optimized_by_default


def _module(lhs: str, rhs: str, dot_attrs: str, result: str, after: str = "") -> str:
    root = "ROOT d" if not after else "d"
    return f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  {root} = {result} dot(a, b), {dot_attrs}
{after}}}
"""


GATES = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
CASES = {
    # A recurrent cell's gates, W (3H, D) @ h.T, with a batch of 8.
    "cell gates": (_module("f32[96,40]", "f32[8,40]", GATES, "f32[96,8]"), True),
    # ... whose transpose the model takes next: the two transposes cancel.
    "cell gates transposed": (_module("f32[96,40]", "f32[8,40]", GATES, "f32[96,8]", "  ROOT t = f32[8,96] transpose(d), dimensions={1,0}\n"), True),
    "batched": (_module("f32[2,70,9]", "f32[2,3,9]", "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}", "f32[2,70,3]"), True),
    "integers wrap alike": (_module("s32[64,5]", "s32[4,5]", GATES, "s32[64,4]"), True),
    "bf16 into f32 chains": (_module("bf16[80,24]", "bf16[8,24]", GATES, "bf16[80,8]"), True),
    # A language model's head against its tied embedding: the rhs, stored (vocabulary,
    # model), would be packed on every run.
    "heavy rhs": (_module("f32[1,16,64]", "f32[256,64]", "lhs_contracting_dims={2}, rhs_contracting_dims={1}", "f32[1,16,256]"), True),
    # Too few lhs rows to fill a vector either way.
    "short lhs": (_module("f32[32,40]", "f32[8,40]", GATES, "f32[32,8]"), False),
    # The rhs fills vectors already.
    "wide rhs": (_module("f32[96,40]", "f32[16,40]", GATES, "f32[96,16]"), False),
    # A rhs (K, N) would become an lhs read against its rows.
    "rhs contracting first": (_module("f32[96,40]", "f32[40,8]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[96,8]"), False),
    # Complex chains take the operands' parts in a pinned order.
    "complex": (_module("c64[96,40]", "c64[8,40]", GATES, "c64[96,8]"), False),
}

SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3e-39, 3e38, -2e38], dtype=np.float32)


def _arrays(program, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for parameter in program.module.entry.parameters:
        shape = parameter.array_shape
        if shape.dtype.is_integer:
            arrays.append(rng.integers(-(2**31), 2**31, shape.dims, dtype=np.int64).astype(np.int32))
            continue
        values = (rng.standard_normal(shape.dims) * 10.0 ** rng.integers(-3, 4, shape.dims)).astype(np.float32)
        special = rng.random(shape.dims) < 0.05
        values[special] = rng.choice(SPECIALS, int(special.sum()))
        if shape.dtype.is_complex:
            parts = values
            values = np.empty(shape.dims, np.complex64)
            values.real, values.imag = parts, np.flip(parts)
        arrays.append(values.astype(shape.dtype.numpy))
    return arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_narrow_dots_swap_with_the_same_bits(name: str) -> None:
    text, swapped = CASES[name]
    program, optimized = optimized_by_default(text)
    dots = instructions_of(optimized, "dot")
    original = next(i for i in program.module.entry.instructions if i.opcode == "dot")
    assert len(dots) == 1
    assert (dots[0].array_shape.dims != original.array_shape.dims) == swapped, dots[0]
    if swapped:
        assert [op.parameter_number for op in dots[0].operands] == [1, 0]
    if name == "cell gates transposed":
        assert not instructions_of(optimized, "transpose")
    run_everywhere(text, _arrays(program, len(name)))


def test_no_dot_swaps_back() -> None:
    sizes = (1, 2, 7, 8, 15, 16, 17, 63, 64, 65, 128, 384, 768, 3072, 8192)
    for m in sizes:
        for k in (1, 8, 64, 768, 4096):
            for n in sizes:
                assert not (better_swapped(m, k, n) and better_swapped(n, k, m)), (m, k, n)
