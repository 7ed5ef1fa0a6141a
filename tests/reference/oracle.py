"""Independent oracles for the tests: IEEE-754 arithmetic in each float format through MPFR
(gmpy2), element by element, and small HLO modules built from text."""

from __future__ import annotations

import math

import gmpy2
import ml_dtypes
import numpy as np

from compiler.hlo import load_module
from compiler.reference import evaluate

FORMATS = {
    "f16": (np.float16, gmpy2.ieee(16)),
    "bf16": (ml_dtypes.bfloat16, gmpy2.context(precision=8, emin=-132, emax=128, subnormalize=True)),
    "f32": (np.float32, gmpy2.ieee(32)),
    "f64": (np.float64, gmpy2.ieee(64)),
}
CANONICAL_NAN = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000}
BITS = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


_EXACT = gmpy2.context(precision=64, emin=-2000, emax=2000)


def mpfr(value: float) -> gmpy2.mpfr:
    """The exact value of a binary64 number (created in a wide context: gmpy2 rounds a new
    number to the current context's exponent range and subnormals)."""
    with gmpy2.context(_EXACT):
        return gmpy2.mpfr(float(value), 53)


def to_format(value: gmpy2.mpfr, dtype: str) -> np.ndarray:
    """An MPFR value already rounded to the format, as a 0-d array of that type (canonical NaN)."""
    numpy_type = FORMATS[dtype][0]
    if gmpy2.is_nan(value):
        return np.array(CANONICAL_NAN[dtype], dtype=BITS[dtype]).view(numpy_type)
    return np.array(float(value)).astype(np.float32 if dtype == "bf16" else numpy_type).astype(numpy_type)


def ieee_binary(op: str, a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """IEEE add/sub/mul/div/fmod of two arrays of a float format, correctly rounded by MPFR."""
    numpy_type, context = FORMATS[dtype]
    out = np.empty(a.shape, dtype=numpy_type)
    with gmpy2.context(context):
        for index in np.ndindex(a.shape):
            x, y = mpfr(a[index]), mpfr(b[index])
            if op == "add":
                r = x + y
            elif op == "subtract":
                r = x - y
            elif op == "multiply":
                r = x * y
            elif op == "divide":
                r = x / y
            elif op == "remainder":
                r = gmpy2.fmod(x, y)
            else:
                raise ValueError(op)
            out[index] = to_format(r, dtype)
    return out


def ieee_fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=np.float32)
    with gmpy2.context(FORMATS["f32"][1]):
        for index in np.ndindex(a.shape):
            out[index] = to_format(gmpy2.fma(mpfr(a[index]), mpfr(b[index]), mpfr(c[index])), "f32")
    return out


def ieee_round(values: np.ndarray, dtype: str) -> np.ndarray:
    """Exact binary64 values rounded once to `dtype`."""
    numpy_type, context = FORMATS[dtype]
    out = np.empty(values.shape, dtype=numpy_type)
    with gmpy2.context(context):
        for index in np.ndindex(values.shape):
            # Multiplying by one rounds to the context's format and keeps the sign of zero.
            out[index] = to_format(mpfr(values[index]) * 1, dtype)
    return out


def ieee_round_int(values: list[int], dtype: str) -> np.ndarray:
    numpy_type, context = FORMATS[dtype]
    with gmpy2.context(context):
        return np.array([to_format(gmpy2.mpz(v) * gmpy2.mpfr(1), dtype) for v in values], dtype=numpy_type)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def special_floats(dtype: str, rng: np.random.Generator, count: int = 64) -> np.ndarray:
    """Special values (±0, ±inf, NaN with odd payload, subnormals, extremes) plus random bit
    patterns over every binade."""
    numpy_type = FORMATS[dtype][0]
    bits_type = BITS[dtype]
    info = np.finfo(np.float32 if dtype == "bf16" else numpy_type)
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 3.0, -2.5,
                float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal),
                -float(info.smallest_subnormal), 1e-3, 7.0e2, 1.0 / 3.0]  # fmt: skip
    special_array = np.array(specials, dtype=np.float64).astype(np.float32 if dtype == "bf16" else numpy_type)
    special_array = special_array.astype(numpy_type)
    width = np.dtype(bits_type).itemsize * 8
    random_bits = rng.integers(0, 2**width, size=count, dtype=np.uint64).astype(bits_type)
    payload_nan = np.array([CANONICAL_NAN[dtype] | 1], dtype=bits_type)
    return np.concatenate([special_array, payload_nan.view(numpy_type), random_bits.view(numpy_type)])


def run(text: str, *arrays: np.ndarray) -> list[np.ndarray]:
    return evaluate(load_module(text), list(arrays))


def elementwise_module(opcode: str, dtype: str, n: int, arity: int, out_dtype: str | None = None, attrs: str = "") -> str:
    out = out_dtype or dtype
    params = "\n".join(f"  p{i} = {dtype}[{n}]{{0}} parameter({i})" for i in range(arity))
    args = ", ".join(f"p{i}" for i in range(arity))
    suffix = f", {attrs}" if attrs else ""
    return f"HloModule t\nENTRY e {{\n{params}\n  ROOT r = {out}[{n}]{{0}} {opcode}({args}){suffix}\n}}\n"
