"""s4 and u4 in the reference evaluator: every op on every pair of values against a model in
Python integers (the contract's 4-bit two's complement), conversions at the bounds, literals,
the `:E(4)` layout mark and the checks on inputs."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from compiler.errors import ArgumentError
from compiler.hlo import HloParseError, load_module
from compiler.hlo.errors import HloUnsupportedError, HloVerifyError
from compiler.reference import evaluate

BINARY = (
    "add", "subtract", "multiply", "divide", "remainder", "and", "or", "xor", "shift-left",
    "shift-right-logical", "shift-right-arithmetic", "power", "maximum", "minimum",
)  # fmt: skip


def _wrap(value: int, signed: bool) -> int:
    value &= 15
    return value - 16 if signed and value >= 8 else value


def _model(op: str, x: int, y: int, signed: bool) -> int:
    """The contract's result of `op` on 4-bit values x and y, in Python integers."""
    amount = y & 15  # shift amounts and exponents are read as unsigned
    if op in ("divide", "remainder") and y == 0:
        return _wrap(-1, signed) if op == "divide" else x
    results = {
        "add": lambda: x + y,
        "subtract": lambda: x - y,
        "multiply": lambda: x * y,
        "and": lambda: x & y,
        "or": lambda: x | y,
        "xor": lambda: x ^ y,
        "shift-left": lambda: 0 if amount >= 4 else x << amount,
        "shift-right-logical": lambda: 0 if amount >= 4 else (x & 15) >> amount,
        "shift-right-arithmetic": lambda: x >> min(amount, 3),
        "maximum": lambda: max(x, y),
        "minimum": lambda: min(x, y),
        # Truncating division; -8 / -1 wraps to -8 and -8 % -1 is 0.
        "divide": lambda: (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1),
        "remainder": lambda: (abs(x) % abs(y)) * (1 if x >= 0 else -1),
        "power": lambda: (1 if x == 1 else 0) if signed and y < 0 else x**amount,
    }
    return _wrap(results[op](), signed)


def _all_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    values = range(-8, 8) if dtype == "s4" else range(16)
    holder = np.int8 if dtype == "s4" else np.uint8
    left, right = zip(*itertools.product(values, values), strict=True)
    return np.array(left, holder), np.array(right, holder)


@pytest.mark.parametrize("dtype", ["s4", "u4"])
@pytest.mark.parametrize("op", BINARY)
def test_every_pair_of_values(dtype: str, op: str) -> None:
    a, b = _all_pairs(dtype)
    text = f"HloModule m\nENTRY e {{\n  a = {dtype}[256] parameter(0)\n  b = {dtype}[256] parameter(1)\n  ROOT r = {dtype}[256] {op}(a, b)\n}}\n"
    (got,) = evaluate(load_module(text), [a, b])
    expected = [_model(op, int(x), int(y), dtype == "s4") for x, y in zip(a, b, strict=True)]
    assert got.dtype == a.dtype
    assert got.tolist() == expected


@pytest.mark.parametrize("dtype", ["s4", "u4"])
def test_unary_ops_and_iota_wrap(dtype: str) -> None:
    a, _ = _all_pairs(dtype)
    a = a[::16]
    text = f"""HloModule m
ENTRY e {{
  a = {dtype}[16] parameter(0)
  n = {dtype}[16] negate(a)
  m = {dtype}[16] abs(a)
  t = {dtype}[16] not(a)
  s = {dtype}[16] sign(a)
  i = {dtype}[40] iota(), iota_dimension=0
  ROOT r = ({dtype}[16], {dtype}[16], {dtype}[16], {dtype}[16], {dtype}[40]) tuple(n, m, t, s, i)
}}
"""
    negated, magnitude, inverted, sign, iota = evaluate(load_module(text), [a])
    signed = dtype == "s4"
    assert negated.tolist() == [_wrap(-int(x), signed) for x in a]
    assert magnitude.tolist() == [_wrap(abs(int(x)), signed) for x in a]  # abs(-8) = -8
    assert inverted.tolist() == [_wrap(~int(x), signed) for x in a]
    assert sign.tolist() == [(int(x) > 0) - (int(x) < 0) for x in a]
    assert iota.tolist() == [_wrap(k, signed) for k in range(40)]


def test_conversions_saturate_and_wrap() -> None:
    text = """HloModule m
ENTRY e {
  f = f32[8] parameter(0)
  w = s32[6] parameter(1)
  fs = s4[8] convert(f)
  fu = u4[8] convert(f)
  ws = s4[6] convert(w)
  wu = u4[6] convert(w)
  back = f32[6] convert(ws)
  wide = s32[6] convert(wu)
  ROOT r = (s4[8], u4[8], s4[6], u4[6], f32[6], s32[6]) tuple(fs, fu, ws, wu, back, wide)
}
"""
    floats = np.array([7.9, 8.0, -8.9, -9.0, np.nan, np.inf, -np.inf, 15.5], np.float32)
    ints = np.array([7, 8, -9, 16, 255, -1], np.int32)
    fs, fu, ws, wu, back, wide = evaluate(load_module(text), [floats, ints])
    assert fs.tolist() == [7, 7, -8, -8, 0, 7, -8, 7]  # truncate, saturate, NaN -> 0
    assert fu.tolist() == [7, 8, 0, 0, 0, 15, 0, 15]
    assert ws.tolist() == [7, -8, 7, 0, -1, -1]  # the low 4 bits
    assert wu.tolist() == [7, 8, 7, 0, 15, 15]
    assert back.tolist() == [7.0, -8.0, 7.0, 0.0, -1.0, -1.0]
    assert wide.tolist() == [7, 8, 7, 0, 15, 15]


def test_dot_of_int4_weights_accumulates_in_the_result_type() -> None:
    text = """HloModule m
ENTRY e {
  x = s4[2,3] parameter(0)
  w = s4[3,2] parameter(1)
  wide = s32[2,2] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  narrow = s4[2,2] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (s32[2,2], s4[2,2]) tuple(wide, narrow)
}
"""
    x = np.array([[-8, 7, 3], [1, -1, 5]], np.int8)
    w = np.array([[7, -8], [7, 2], [-3, 4]], np.int8)
    wide, narrow = evaluate(load_module(text), [x, w])
    exact = x.astype(np.int64) @ w.astype(np.int64)
    assert wide.tolist() == exact.tolist()
    assert narrow.tolist() == [[_wrap(int(v), True) for v in row] for row in exact]


def test_literals_are_range_checked_and_negative_u4_wraps() -> None:
    (value,) = evaluate(load_module("HloModule m\nENTRY e {\n  ROOT c = u4[3] constant({-1, 0, 15})\n}\n"), [])
    assert value.tolist() == [15, 0, 15]
    with pytest.raises(HloParseError, match="8 is out of range for s4"):
        load_module("HloModule m\nENTRY e {\n  ROOT c = s4[1] constant({8})\n}\n")


def test_the_packing_mark_of_4_bit_layouts_is_read() -> None:
    module = load_module("HloModule m\nENTRY e {\n  p = s4[2,3]{0,1:E(4)} parameter(0)\n  ROOT c = s4[3,2]{1,0:E(4)} transpose(p), dimensions={1,0}\n}\n")
    assert module.entry.root.shape.dtype.name == "s4"
    with pytest.raises(HloUnsupportedError, match="stores elements in 4 bits"):
        load_module("HloModule m\nENTRY e {\n  ROOT p = s8[2]{0:E(4)} parameter(0)\n}\n")


def test_bitcast_convert_that_would_pack_is_refused_with_its_reason() -> None:
    with pytest.raises(HloVerifyError, match="packs 4-bit elements"):
        load_module("HloModule m\nENTRY e {\n  p = s4[5,2] parameter(0)\n  ROOT c = s8[5] bitcast-convert(p)\n}\n")


def test_inputs_must_hold_values_of_the_type() -> None:
    module = load_module("HloModule m\nENTRY e {\n  ROOT p = s4[3] parameter(0)\n}\n")
    (same,) = evaluate(module, [np.array([-8, 0, 7], np.int8)])
    assert same.tolist() == [-8, 0, 7]
    (from_jax,) = evaluate(module, [np.array([-8, 0, 7], ml_dtypes.int4)])
    assert from_jax.dtype == np.int8 and from_jax.tolist() == [-8, 0, 7]
    with pytest.raises(ArgumentError, match=r"element \[1\] is 9, outside \[-8, 7\]"):
        evaluate(module, [np.array([0, 9, 0], np.int8)])
    with pytest.raises(ArgumentError, match="s4 values are passed as int8"):
        evaluate(module, [np.array([0, 1, 0], np.int32)])
