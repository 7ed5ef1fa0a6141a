"""Elementwise math functions of the numerics contract (reference implementation).

binary32: exp, expm1, log, log1p, tanh, logistic, erf, sin, cos, rsqrt and cbrt are
correctly rounded (round to nearest even of the exact real value).
binary64: each function is a pinned algorithm, a fixed sequence of IEEE binary64 operations
that the backend reproduces bit for bit. power and atan2 are pinned in both precisions; the
binary32 versions are the binary64 results rounded once to binary32.
Every NaN produced is the canonical quiet NaN. docs/numerics.md (section 3) is the normative text.

Each pinned algorithm is written once in the small DSL of `dsl.py` and executed by two
backends: numpy (`numpy_ops.py`, this reference) and LLVM IR (compiler/codegen/mathlib_ir.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from compiler.numerics.floats import canonicalize_nans
from core.dtypes import from_numpy

from .correctly_rounded import unary_f32 as _unary_f32
from .numpy_ops import NUMPY
from .pinned_f64 import BINARY_ALGORITHMS, PINNED_F64, UNARY_ALGORITHMS

__all__ = ["UNARY_FUNCTIONS", "UNARY_OPCODES", "atan2", "power", "unary"]

# The functions, in one order: the pinned algorithms' table owns the list.
UNARY_FUNCTIONS = tuple(UNARY_ALGORITHMS)

# The HLO opcodes these functions implement: what the reference evaluator and the backend
# both dispatch on.
UNARY_OPCODES = {
    "exponential": "exp",
    "exponential-minus-one": "expm1",
    "log": "log",
    "log-plus-one": "log1p",
    "tanh": "tanh",
    "logistic": "logistic",
    "rsqrt": "rsqrt",
    "cbrt": "cbrt",
    "erf": "erf",
    "sine": "sin",
    "cosine": "cos",
}

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

# Elements per evaluation chunk: the algorithms are elementwise, so chunking changes no
# result; it keeps the many temporaries cache-resident (2-4x faster than whole arrays).
CHUNK = 1 << 15


def _chunked(fn: Callable[..., np.ndarray], out_dtype: np.dtype, *args: np.ndarray) -> np.ndarray:
    """fn applied to consecutive chunks of the 1-D arrays args, results concatenated."""
    n = args[0].size
    out = np.empty(n, dtype=out_dtype)
    with np.errstate(all="ignore"):
        for start in range(0, n, CHUNK):
            stop = min(start + CHUNK, n)
            out[start:stop] = fn(*(a[start:stop] for a in args))
    return out


def _check_float(x: np.ndarray, what: str) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in _FLOAT_TYPES:
        raise TypeError(f"{what} must be a float32 or float64 ndarray")


def unary(name: str, x: np.ndarray) -> np.ndarray:
    """Apply the unary contract function `name` elementwise; same shape and dtype as x.

    float32: correctly rounded. float64: the pinned binary64 algorithm. The result does
    not depend on the shape, strides or memory order of x.
    """
    if name not in UNARY_FUNCTIONS:
        raise ValueError(f"unknown unary function {name!r}")
    _check_float(x, "x")
    flat = np.array(x, copy=True, order="C").reshape(-1)
    if flat.dtype == np.float32:
        y = _chunked(partial(_unary_f32, name), flat.dtype, flat)
    else:
        y = _chunked(PINNED_F64[name], flat.dtype, flat)
    return canonicalize_nans(y, from_numpy(y.dtype)).reshape(x.shape)


def _binary(fn_name: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _check_float(a, f"{fn_name} first operand")
    _check_float(b, f"{fn_name} second operand")
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"{fn_name} operands must have the same dtype and shape")
    return (
        np.array(a, dtype=np.float64, order="C").reshape(-1),
        np.array(b, dtype=np.float64, order="C").reshape(-1),
    )


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pinned pow(x, y) with C99 Annex F special cases.

    float32: the pinned binary64 result for the exactly converted inputs, rounded once to
    float32 (this double rounding is the definition; it can differ from the correctly
    rounded value in rare cases).
    """
    xf, yf = _binary("power", x, y)
    r = _chunked(partial(BINARY_ALGORITHMS["power"], NUMPY), x.dtype, xf, yf)
    return canonicalize_nans(r, from_numpy(r.dtype)).reshape(x.shape)


def atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pinned atan2(y, x) with C99 Annex F special cases; float32 as for power."""
    yf, xf = _binary("atan2", y, x)
    r = _chunked(partial(BINARY_ALGORITHMS["atan2"], NUMPY), y.dtype, yf, xf)
    return canonicalize_nans(r, from_numpy(r.dtype)).reshape(y.shape)
