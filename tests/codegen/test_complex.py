"""c64 and c128 on the LLVM backend: the reference's bits on every target and thread count,
for the arithmetic on every pairing of special parts, conversions from every type, dot,
reduce, and the ops that only move complex values (fused, in loops, gathered)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.hlo import load_module
from compiler.reference import evaluate
from core.dtypes import ALL_DTYPES
from harness.hlo_fragments import scalar_binary
from harness.targets import COMPILE_ONLY, check_without_running, run_everywhere
from tests.codegen.test_int4 import _values

SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, 1.0, -2.5)


def _special_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pairing of two complex values whose parts are special: 9^4 pairs."""
    numpy_type = np.complex64 if dtype == "c64" else np.complex128
    values = [complex(r, i) for r, i in itertools.product(SPECIALS, SPECIALS)]
    left, right = zip(*itertools.product(values, values), strict=True)
    return np.array(left, numpy_type), np.array(right, numpy_type)


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_arithmetic_on_every_pairing_of_special_parts(dtype: str) -> None:
    a, b = _special_pairs(dtype)
    part = "f32" if dtype == "c64" else "f64"
    n = len(a)
    text = f"""HloModule m
ENTRY e {{
  a = {dtype}[{n}] parameter(0)
  b = {dtype}[{n}] parameter(1)
  s = {dtype}[{n}] add(a, b)
  d = {dtype}[{n}] subtract(a, b)
  m = {dtype}[{n}] multiply(a, b)
  q = {dtype}[{n}] divide(a, b)
  g = {dtype}[{n}] negate(a)
  r = {part}[{n}] abs(a)
  sg = {dtype}[{n}] sign(a)
  re = {part}[{n}] real(b)
  im = {part}[{n}] imag(b)
  c = {dtype}[{n}] complex(im, re)
  eq = pred[{n}] compare(a, b), direction=EQ
  ne = pred[{n}] compare(a, b), direction=NE
  sel = {dtype}[{n}] select(eq, c, m)
  ROOT t = tuple(s, d, m, q, g, r, c, eq, ne, sel, sg)
}}
"""
    run_everywhere(text, [a, b])


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_conversions_from_every_type(dtype: str) -> None:
    rng = np.random.default_rng(7)
    others = [d for d in ALL_DTYPES if d.name != dtype]
    lines = [f"  x{k} = {other}[64] parameter({k})\n  to{k} = {dtype}[64] convert(x{k})" for k, other in enumerate(others)]
    outputs = ", ".join(f"to{k}" for k in range(len(others)))
    text = "HloModule m\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = tuple({outputs})\n}}\n"
    arrays = []
    for other in others:
        if other.is_complex:
            arrays.append((rng.standard_normal(64) * 1e3 + 1j * rng.standard_normal(64)).astype(other.numpy))
        else:
            arrays.append(_values(rng, other, 64))
    run_everywhere(text, arrays)


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_dot_reduce_and_moved_values(dtype: str) -> None:
    rng = np.random.default_rng(8)
    numpy_type = np.complex64 if dtype == "c64" else np.complex128
    part = "f32" if dtype == "c64" else "f64"

    def random(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(numpy_type)

    x, w, batched = random(5, 33), random(33, 7), random(3, 4, 6)
    at = rng.integers(0, 5, size=(4, 1)).astype(np.int32)
    text = (
        "HloModule m\n"
        + scalar_binary("add", dtype, "add", lhs="p", rhs="q")
        + scalar_binary("mul", dtype, "multiply", lhs="p", rhs="q")
        + f"""cond {{
  s = (s32[], {dtype}[5,33]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}}
body {{
  s = (s32[], {dtype}[5,33]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = {dtype}[5,33] get-tuple-element(s), index=1
  twice = {dtype}[5,33] multiply(v, v)
  step = s32[] constant(1)
  j = s32[] add(i, step)
  ROOT next = (s32[], {dtype}[5,33]) tuple(j, twice)
}}
ENTRY e {{
  x = {dtype}[5,33] parameter(0)
  w = {dtype}[33,7] parameter(1)
  y = {dtype}[3,4,6] parameter(2)
  at = s32[4,1] parameter(3)
  xw = {dtype}[5,7] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  yy = {dtype}[3,4,4] dot(y, y), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
  real_w = {part}[33,7] real(w)
  mixed = {dtype}[5,7] dot(x, real_w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  zero = {dtype}[] constant((0, -0))
  one = {dtype}[] constant((1, 0))
  rows = {dtype}[5] reduce(x, zero), dimensions={{1}}, to_apply=add
  product = {dtype}[33] reduce(x, one), dimensions={{0}}, to_apply=mul
  offset = {dtype}[] constant((0.5, -1))
  offsets = {dtype}[5,33] broadcast(offset), dimensions={{}}
  shifted = {dtype}[5,33] add(x, offsets)
  moved = {dtype}[33,5] transpose(shifted), dimensions={{1,0}}
  padded = {dtype}[7,34] pad(x, one), padding=1_1x0_1
  joined = {dtype}[10,33] concatenate(x, shifted), dimensions={{0}}
  picked = {dtype}[4,33] gather(x, at), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,33}}
  start = s32[] constant(0)
  state = (s32[], {dtype}[5,33]) tuple(start, x)
  loop = (s32[], {dtype}[5,33]) while(state), condition=cond, body=body
  looped = {dtype}[5,33] get-tuple-element(loop), index=1
  ROOT r = tuple(xw, yy, mixed, rows, product, moved, padded, joined, picked, looped)
}}
"""
    )
    run_everywhere(text, [x, w, batched, at])


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_sign_is_the_value_over_its_absolute_value_and_zero_at_zero(dtype: str) -> None:
    """XLA:CPU's complex sign: each part divided by the contract's |a|, 0 + 0i where |a| = 0."""
    numpy_type = np.complex64 if dtype == "c64" else np.complex128
    inf, nan = np.inf, np.nan
    x = np.array([3 + 4j, -3 - 4j, 0, complex(-0.0, -0.0), complex(0, -5), complex(inf, 0), complex(nan, 1)], numpy_type)
    text = f"HloModule m\nENTRY e {{\n  a = {dtype}[7] parameter(0)\n  ROOT s = {dtype}[7] sign(a)\n}}\n"
    run_everywhere(text, [x])  # the backend's bytes are the reference's, every target and thread count
    [out] = evaluate(load_module(text), [x])
    assert out[:5].tolist() == np.array([0.6 + 0.8j, -0.6 - 0.8j, 0j, 0j, -1j], numpy_type).tolist()
    assert np.signbit(out[3].real) == np.signbit(out[3].imag) == False  # noqa: E712 - +0 + 0i, as XLA
    assert np.isnan(out[5].real) and out[5].imag == 0  # inf/inf: the formula's NaN, canonical
    assert np.isnan(out[6].real) and np.isnan(out[6].imag)


def _lexicographic_sort(dtype: str, n: int) -> str:
    """What jnp.sort of complex values lowers to: a stable sort whose comparator orders by
    the real part, then the imaginary part (totalorder), with the positions sorted along."""
    part = "f32" if dtype == "c64" else "f64"
    return f"""HloModule jit_sort

lexicographic {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ar = {part}[] real(a)
  br = {part}[] real(b)
  lt = pred[] compare(ar, br), direction=LT, type=TOTALORDER
  eq = pred[] compare(ar, br), direction=EQ, type=TOTALORDER
  ai = {part}[] imag(a)
  bi = {part}[] imag(b)
  ilt = pred[] compare(ai, bi), direction=LT, type=TOTALORDER
  both = pred[] and(eq, ilt)
  ROOT r = pred[] or(lt, both)
}}

ENTRY e {{
  x = {dtype}[3,{n}] parameter(0)
  positions = s32[3,{n}] iota(), iota_dimension=1
  ROOT s = ({dtype}[3,{n}], s32[3,{n}]) sort(x, positions), dimensions={{1}}, is_stable=true, to_apply=lexicographic
}}
"""


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_sort_orders_complex_values_by_the_comparator_over_their_parts(dtype: str) -> None:
    numpy_type = np.complex64 if dtype == "c64" else np.complex128
    values = [complex(r, i) for r, i in itertools.product(SPECIALS, SPECIALS)]
    x = np.array([values, values[::-1], values[40:] + values[:40]], numpy_type)
    text = _lexicographic_sort(dtype, len(values))
    run_everywhere(text, [x])  # the backend's bytes are the reference's, every target and thread count
    [ordered, positions] = evaluate(load_module(text), [x])
    def key(z: complex) -> tuple:  # totalorder of the parts: -0 before +0
        return (z.real, not np.signbit(z.real), z.imag, not np.signbit(z.imag))

    for row, moved, original in zip(ordered, positions, x, strict=True):
        assert np.array_equal(row, original[moved], equal_nan=True)
        finite = [z for z in row.tolist() if not (np.isnan(z.real) or np.isnan(z.imag))]
        assert finite == sorted(finite, key=key)


def test_complex_sign_and_sort_compile_for_the_targets_this_host_cannot_run() -> None:
    for cpu in COMPILE_ONLY:
        check_without_running(_lexicographic_sort("c64", 9), cpu)
        check_without_running("HloModule m\nENTRY e {\n  a = c128[7] parameter(0)\n  ROOT s = c128[7] sign(a)\n}\n", cpu)

