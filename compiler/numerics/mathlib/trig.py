"""Pinned binary64 sin and cos: argument reduction and kernels (DSL code)."""

from __future__ import annotations

import math

import numpy as np

from . import constants as C
from .double_double import fast_two_sum, horner, two_prod, two_sum
from .dsl import Ops, Table, Value
from .ieee import FRAC_MASK, biased_exponent
from .numpy_ops import NUMPY

CODY_WAITE_LIMIT = 2.0**20  # |x| below this: Cody-Waite; at or above: Payne-Hanek
NAN = math.nan

# Payne-Hanek geometry: a 182-bit window of 2/pi, as 7 limbs of 26 bits.
_LIMB_BITS = 26
_LIMBS = 7
_WINDOW_BITS = _LIMB_BITS * _LIMBS
_LIMB_MASK = (1 << _LIMB_BITS) - 1
_S_MIN = -33  # window start s = E - 1 for |x| = M * 2**E >= 2**20 (E >= -32)
_S_MAX = 970  # largest finite binary64: E = 971


def _two_over_pi_windows() -> np.ndarray:
    """windows[s - S_MIN, t] = limb t of G(s) = floor(2/pi * 2**(s + 181)) mod 2**182.

    Derived exactly from the bits of 2/pi in the constants module (integer arithmetic).
    """
    bits = C.TRIG_TWO_OVER_PI_BITS  # floor(2/pi * 2**1216)
    rows = []
    for s in range(_S_MIN, _S_MAX + 1):
        shift = C.TRIG_TWO_OVER_PI_NBITS - (s + _WINDOW_BITS - 1)
        window = (bits >> shift) & ((1 << _WINDOW_BITS) - 1)
        rows.append([(window >> (_LIMB_BITS * t)) & _LIMB_MASK for t in range(_LIMBS)])
    return np.array(rows, dtype=np.int64)


_WINDOWS = _two_over_pi_windows()
# WINDOW_LIMBS[t][s - S_MIN]: limb t of the window starting at s (one table per limb).
WINDOW_LIMBS = tuple(
    Table(f"trig_window_limb{t}", [int(v) for v in _WINDOWS[:, t]]) for t in range(_LIMBS)
)


def reduce_cody_waite(ops: Ops, a: Value) -> tuple[Value, Value, Value]:
    """For 0 <= a < 2**20: (q, rh, rl) with a = k*pi/2 + rh + rl, q = k mod 4."""
    kf = ops.rint(a * C.TRIG_TWO_OVER_PI)
    t = a - kf * C.TRIG_PIO2_C1  # exact: k < 2**20, C1 has 33 bits, Sterbenz
    s1, e1 = two_sum(t, -(kf * C.TRIG_PIO2_C2))  # k*C2 exact
    s2, e2 = two_sum(s1, -(kf * C.TRIG_PIO2_C3))  # k*C3 exact
    low = (e1 + e2) - kf * C.TRIG_PIO2_C4
    rh, rl = fast_two_sum(s2, low)
    return ops.to_int(kf) & 3, rh, rl


def payne_hanek(ops: Ops, a: Value) -> tuple[Value, Value, Value]:
    """For finite a >= 2**20: (q, rh, rl) with a = k*pi/2 + r, q = k mod 4, |r| <= pi/4.

    a = M * 2**E with M a 53-bit integer. P = M * G(E - 1) mod 2**182 is computed exactly
    in 26-bit limbs; P * 2**-180 = a * 2/pi mod 4 up to 2**-127.
    """
    big_e = biased_exponent(ops, a) - 1075
    mant = (ops.bits(a) & FRAC_MASK) | (1 << 52)
    row = big_e - 1 - _S_MIN
    g = [ops.table(limb, row) for limb in WINDOW_LIMBS]
    m0 = mant & _LIMB_MASK
    m1 = mant >> _LIMB_BITS
    limbs = []
    carry = None
    for t in range(_LIMBS):
        col = m0 * g[t] if carry is None else m0 * g[t] + carry
        if t > 0:
            col = col + m1 * g[t - 1]
        limbs.append(col & _LIMB_MASK)
        carry = col >> _LIMB_BITS
    # Round to the nearest quadrant: add 1/2 (bit 23 of the top limb), then the top two
    # bits are k mod 4 and the rest, minus 1/2, is the signed fraction f in [-1/2, 1/2).
    top = limbs[6] + (1 << 23)
    q = (top >> 24) & 3
    s6 = (top & ((1 << 24) - 1)) - (1 << 23)
    lf = [ops.to_float(limb) for limb in limbs]
    hi_part = ops.to_float(s6) * 2.0**-24 + lf[5] * 2.0**-50  # exact (50 bits)
    mid_part = lf[4] * 2.0**-76 + lf[3] * 2.0**-102  # exact (52 bits)
    low_part = lf[2] * 2.0**-128 + lf[1] * 2.0**-154  # exact (52 bits)
    fh, fl = two_sum(hi_part, mid_part)
    fh, fl = fast_two_sum(fh, fl + low_part)
    # r = f * pi/2 in double-double
    ph, pl = two_prod(fh, C.TRIG_PIO2_HI)
    pl = pl + (fh * C.TRIG_PIO2_LO + fl * C.TRIG_PIO2_HI)
    rh, rl = fast_two_sum(ph, pl)
    return q, rh, rl


def reduce_payne_hanek(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """payne_hanek on numpy arrays (the reference backend)."""
    return payne_hanek(NUMPY, a)


def reduce(ops: Ops, a: Value) -> tuple[Value, Value, Value]:
    """(q, rh, rl) for finite a >= 0: a = k*pi/2 + rh + rl with q = k mod 4."""
    return ops.branch(
        a < CODY_WAITE_LIMIT,
        lambda v: reduce_cody_waite(ops, v),
        lambda v: payne_hanek(ops, v),
        (a,),
        safe_true=(0.0,),
        safe_false=(CODY_WAITE_LIMIT,),
    )


def sin_kernel(rh: Value, rl: Value) -> Value:
    """sin(rh + rl) for |rh| <= pi/4 (Taylor to r^19)."""
    z = rh * rh
    p = horner(C.SIN_POLY, z)
    t = (z * rh) * p
    u = rl - (0.5 * z) * rl  # rl * cos(rh) to first order
    return rh + (t + u)


def cos_kernel(rh: Value, rl: Value) -> Value:
    """cos(rh + rl) for |rh| <= pi/4 (Taylor to r^20)."""
    z = rh * rh
    p = horner(C.COS_POLY, z)
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + ((z * z) * p - rh * rl))


def _sin_cos(ops: Ops, x: Value, want_sin: bool) -> Value:
    finite = ops.isfinite(x)
    a = ops.where(finite, ops.abs(x), 0.0)
    q, rh, rl = reduce(ops, a)
    s = sin_kernel(rh, rl)
    c = cos_kernel(rh, rl)
    if not want_sin:
        q = (q + 1) & 3  # cos(x) = sin(x + pi/2)
    y = ops.where((q & 1) == 0, s, c)
    y = ops.where(q >= 2, -y, y)
    if want_sin:
        y = ops.where(x < 0.0, -y, y)  # sin(-x) = -sin(x)
        y = ops.where(x == 0.0, x, y)
    return ops.where(finite, y, NAN)


def sin(ops: Ops, x: Value) -> Value:
    """Pinned binary64 sine."""
    return _sin_cos(ops, x, True)


def cos(ops: Ops, x: Value) -> Value:
    """Pinned binary64 cosine."""
    return _sin_cos(ops, x, False)
