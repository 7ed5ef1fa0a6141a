"""Error-free transformations and double-double steps (binary64, no fma; DSL code).

Each function is a fixed sequence of binary64 operations with round-to-nearest-even; the
operation order written here is the order of the pinned algorithm. They use only the
operators, so they run unchanged on every backend of the DSL (compiler.numerics.mathlib.dsl);
an operand may be a Python float constant.
"""

from __future__ import annotations

from .dsl import Value

SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp splitting constant)


def two_sum(a: Value, b: Value) -> tuple[Value, Value]:
    """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fast_two_sum(a: Value, b: Value) -> tuple[Value, Value]:
    """(s, e) with s = RN(a + b), s + e = a + b exactly, valid when |a| >= |b| (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


def split(a: Value) -> tuple[Value, Value]:
    """Veltkamp split a = hi + lo, each with at most 26 significant bits (|a| < 2**996)."""
    c = SPLITTER * a
    hi = c - (c - a)
    lo = a - hi
    return hi, lo


def two_prod(a: Value, b: Value) -> tuple[Value, Value]:
    """(p, e) with p = RN(a * b) and p + e = a * b exactly barring underflow (Dekker)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = (((ah * bh - p) + ah * bl) + al * bh) + al * bl
    return p, e


def dd_divide(nh: Value, nl: Value, dh: Value, dl: Value) -> tuple[Value, Value]:
    """(q, c): q = RN(nh / dh) and c a binary64 correction with q + c ~ (nh + nl)/(dh + dl).

    c = ((((nh - p) - e) + nl) - q * dl) / dh where (p, e) = two_prod(q, dh).
    """
    q = nh / dh
    p, e = two_prod(q, dh)
    r = (((nh - p) - e) + nl) - q * dl
    return q, r / dh


def horner(coeffs: tuple[float, ...], x: Value) -> Value:
    """coeffs[0] + x*(coeffs[1] + x*(...)), evaluated from the last coefficient inwards.

    p = coeffs[-1], then p = p * x + c for the others (a multiplication, then an addition).
    """
    p = coeffs[-1]
    for c in coeffs[-2::-1]:
        p = p * x + c
    return p
