"""s4 and u4 on the LLVM backend: the reference's bits on every target and thread count, for
the elementwise ops on every pair of values, conversions from and to every type, and the
structured ops that carry 4-bit values (fusions, reduce, dot, sort, gather, pad)."""

from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler.errors import ArgumentError
from core.dtypes import ALL_DTYPES, DType
from harness.hlo_fragments import scalar_binary
from harness.targets import DEFAULT, run_everywhere
from tests.reference.test_int4 import BINARY, _all_pairs


@pytest.mark.parametrize("dtype", ["s4", "u4"])
def test_elementwise_ops_on_every_pair(dtype: str) -> None:
    a, b = _all_pairs(dtype)
    body = "\n".join(f"  r{k} = {dtype}[256] {op}(a, b)" for k, op in enumerate(BINARY))
    names = ", ".join(f"r{k}" for k in range(len(BINARY)))
    text = f"""HloModule m
ENTRY e {{
  a = {dtype}[256] parameter(0)
  b = {dtype}[256] parameter(1)
{body}
  n = {dtype}[256] negate(a)
  m = {dtype}[256] abs(a)
  t = {dtype}[256] not(a)
  s = {dtype}[256] sign(a)
  c = {dtype}[256] clamp(b, a, b)
  lt = pred[256] compare(a, b), direction=LT
  sel = {dtype}[256] select(lt, a, b)
  i = {dtype}[256] iota(), iota_dimension=0
  ROOT r = tuple({names}, n, m, t, s, c, lt, sel, i)
}}
"""
    run_everywhere(text, [a, b])


def _values(rng: np.random.Generator, dtype: DType, count: int) -> np.ndarray:
    """Values of `dtype` around the 4-bit range and far outside it, with the specials."""
    if dtype.is_pred:
        return rng.random(count) < 0.5
    if dtype.is_float:
        base = rng.uniform(-20, 20, count) * 10.0 ** rng.integers(0, 3, count)
        base[:6] = [np.nan, np.inf, -np.inf, -0.0, 7.999, -8.5]
        return base.astype(dtype.numpy)
    if dtype.is_sub_byte:
        least, greatest = dtype.integer_bounds
        return rng.integers(least, greatest, count, endpoint=True).astype(dtype.numpy)
    info = np.iinfo(dtype.numpy)
    return np.concatenate([rng.integers(-20, 20, count // 2).astype(dtype.numpy), rng.integers(info.min, info.max, count - count // 2, dtype=dtype.numpy, endpoint=True)])


@pytest.mark.parametrize("dtype", ["s4", "u4"])
def test_conversions_from_and_to_every_type(dtype: str) -> None:
    rng = np.random.default_rng(4)
    holder, _ = _all_pairs(dtype)
    # Complex values convert to no integer type (the imaginary part would be dropped).
    others = [d for d in ALL_DTYPES if d.name != dtype and not d.is_complex]
    lines = [f"  x{k} = {other}[64] parameter({k + 1})\n  to{k} = {dtype}[64] convert(x{k})\n  from{k} = {other}[256] convert(a)" for k, other in enumerate(others)]
    lines += [f"  c{k} = {d.name}[256] convert(a)" for k, d in enumerate(ALL_DTYPES) if d.is_complex]
    outputs = ", ".join([f"to{k}, from{k}" for k in range(len(others))] + [f"c{k}" for k, d in enumerate(ALL_DTYPES) if d.is_complex])
    text = f"HloModule m\nENTRY e {{\n  a = {dtype}[256] parameter(0)\n" + "\n".join(lines) + f"\n  ROOT r = tuple({outputs})\n}}\n"
    arrays = [holder] + [_values(rng, other, 64) for other in others]
    run_everywhere(text, arrays)


@pytest.mark.parametrize("dtype", ["s4", "u4"])
def test_structured_ops_carry_4_bit_values(dtype: str) -> None:
    rng = np.random.default_rng(5)
    low, high = (-8, 8) if dtype == "s4" else (0, 16)
    holder = np.int8 if dtype == "s4" else np.uint8
    x = rng.integers(low, high, size=(33, 40)).astype(holder)
    w = rng.integers(low, high, size=(40, 24)).astype(holder)
    indices = rng.integers(0, 33, size=(7, 1)).astype(np.int32)
    text = "HloModule m\n" + scalar_binary("add", dtype, "add", lhs="p", rhs="q") + f"""less {{
  p = {dtype}[] parameter(0)
  q = {dtype}[] parameter(1)
  ROOT lt = pred[] compare(p, q), direction=LT
}}
ENTRY e {{
  x = {dtype}[33,40] parameter(0)
  w = {dtype}[40,24] parameter(1)
  at = s32[7,1] parameter(2)
  one = {dtype}[] constant(1)
  ones = {dtype}[33,40] broadcast(one), dimensions={{}}
  shifted = {dtype}[33,40] add(x, ones)
  threes = {dtype}[33,40] broadcast({dtype}[] constant(3)), dimensions={{}}
  tripled = {dtype}[33,40] multiply(shifted, threes)
  zero = {dtype}[] constant(0)
  rows = {dtype}[33] reduce(tripled, zero), dimensions={{1}}, to_apply=add
  wide = s32[33,24] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  narrow = {dtype}[33,24] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  sorted = {dtype}[33,40] sort(x), dimensions={{1}}, is_stable=true, to_apply=less
  picked = {dtype}[7,40] gather(x, at), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,40}}
  padded = {dtype}[35,41] pad(x, one), padding=1_1x0_1
  moved = {dtype}[40,33] transpose(x), dimensions={{1,0}}
  ROOT r = tuple(rows, wide, narrow, sorted, picked, padded, moved)
}}
"""
    run_everywhere(text, [x, w, indices])


def test_the_int4_weight_matmul_jax_writes() -> None:
    """What `x @ w.astype(jnp.float32)` with int4 `w` lowers to: a convert feeding a dot."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.integers(-8, 8, size=(64, 16)).astype(np.int8)
    text = """HloModule m
ENTRY e {
  x = f32[8,64] parameter(0)
  w = s4[64,16] parameter(1)
  wf = f32[64,16] convert(w)
  ROOT y = f32[8,16] dot(x, wf), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    run_everywhere(text, [x, w])


def test_the_executable_checks_4_bit_inputs_even_when_their_holder_type_matches() -> None:
    executable = compiler.compile("HloModule m\nENTRY e {\n  a = u4[3] parameter(0)\n  ROOT r = u4[3] add(a, a)\n}\n", target=DEFAULT, cache_dir=False)
    assert executable.run(np.array([1, 15, 0], np.uint8))[0].tolist() == [2, 14, 0]
    with pytest.raises(ArgumentError, match=r"element \[2\] is 16, outside \[0, 15\]"):
        executable.run(np.array([1, 15, 16], np.uint8))


@pytest.mark.parametrize("dtype", ["s2", "u2"])
def test_2_bit_integers_wrap_in_2_bits_on_every_target(dtype: str) -> None:
    """s2 and u2 are held as s4 and u4 are: every pair of values through add, subtract,
    multiply and the shifts, conversions in and out, a dot accumulated in s8 and wrapped,
    against a model that wraps modulo 4; the backend gives the reference's bits."""
    signed = dtype == "s2"
    values = range(-2, 2) if signed else range(4)
    holder = np.int8 if signed else np.uint8
    a = np.array([x for x in values for _ in values], holder)
    b = np.array([y for _ in values for y in values], holder)
    text = f"""HloModule m
ENTRY e {{
  a = {dtype}[16] parameter(0)
  b = {dtype}[16] parameter(1)
  add = {dtype}[16] add(a, b)
  mul = {dtype}[16] multiply(a, b)
  sub = {dtype}[16] subtract(a, b)
  wide = s32[16] convert(a)
  back = {dtype}[16] convert(s32[16] multiply(wide, wide))
  f = f32[16] convert(b)
  ab = {dtype}[4,4] reshape(a)
  bb = {dtype}[4,4] reshape(b)
  d = {dtype}[4,4] dot(ab, bb), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT r = ({dtype}[16], {dtype}[16], {dtype}[16], {dtype}[16], f32[16], {dtype}[4,4]) tuple(add, mul, sub, back, f, d)
}}
"""

    def wrap(value: int) -> int:
        low = value & 3
        return low - 4 if signed and low >= 2 else low

    from compiler.hlo import load_module
    from compiler.reference import evaluate

    add, mul, sub, back, f, d = evaluate(load_module(text), [a, b])
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))
    assert add.tolist() == [wrap(x + y) for x, y in pairs]
    assert mul.tolist() == [wrap(x * y) for x, y in pairs]
    assert sub.tolist() == [wrap(x - y) for x, y in pairs]
    assert back.tolist() == [wrap(x * x) for x in a.tolist()]
    assert f.tolist() == [float(y) for y in b.tolist()]
    exact = a.astype(np.int64).reshape(4, 4) @ b.astype(np.int64).reshape(4, 4)
    assert d.tolist() == [[wrap(int(v)) for v in row] for row in exact]
    run_everywhere(text, [a, b])
