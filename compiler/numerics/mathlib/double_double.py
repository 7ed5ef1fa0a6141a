"""Error-free transformations and double-double steps (binary64, no fma).

Each function is a fixed sequence of binary64 operations with round-to-nearest-even; the
operation order written here is the order of the pinned algorithm.
"""

from __future__ import annotations

import numpy as np

SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp splitting constant)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fast_two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = RN(a + b), s + e = a + b exactly, valid when |a| >= |b| (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


def split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp split a = hi + lo, each with at most 26 significant bits (|a| < 2**996)."""
    c = SPLITTER * a
    hi = c - (c - a)
    lo = a - hi
    return hi, lo


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = RN(a * b) and p + e = a * b exactly barring underflow (Dekker)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = (((ah * bh - p) + ah * bl) + al * bh) + al * bl
    return p, e


def dd_divide(
    nh: np.ndarray, nl: np.ndarray, dh: np.ndarray, dl: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(q, c): q = RN(nh / dh) and c a binary64 correction with q + c ~ (nh + nl)/(dh + dl).

    c = ((((nh - p) - e) + nl) - q * dl) / dh where (p, e) = two_prod(q, dh).
    """
    q = nh / dh
    p, e = two_prod(q, dh)
    r = (((nh - p) - e) + nl) - q * dl
    return q, r / dh
