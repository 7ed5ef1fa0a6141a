"""Generate the constant tables of the pinned math library.

Every constant used by ``compiler/numerics/mathlib`` is defined here as a real number
(computed with MPFR through gmpy2 at 400 bits) and rounded to binary64 with
round-to-nearest-even, or to fewer bits where a constant must have trailing zeros so that
its product with a small integer is exact. The output is the complete text of
``compiler/numerics/mathlib/constants.py``; a test checks that the committed module is
byte for byte what this script produces.

Usage:
    python tools/mathlib_constants.py            # print the module
    python tools/mathlib_constants.py --write    # rewrite the module in place
    python tools/mathlib_constants.py --check    # exit 1 if the module differs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import gmpy2
from gmpy2 import mpfr

WORK_PRECISION = 400
MODULE_PATH = Path(__file__).resolve().parent.parent / "compiler/numerics/mathlib/constants.py"

# Table geometry. These numbers are part of the pinned algorithms.
EXP_TABLE_SIZE = 64  # exp: 2^(j/64), j = 0..63
LOG_TABLE_SIZE = 128  # log: indexed by the top 7 fraction bits of the significand
LOG_FOLD_INDEX = 53  # log: indices >= 53 use the significand halved (m >= 1.4140625)
ERF_SMALL_LIMIT = 0.5  # erf: odd Taylor series below this
ERF_INTERVAL_WIDTH = 0.5  # erf: Taylor expansions around 0.75, 1.25, ..., 5.75
ERF_INTERVALS = 11
ERF_DEGREE = 19
ERF_SMALL_TERMS = 14  # coefficients of x^1, x^3, ..., x^27
ATAN_TABLE_SIZE = 32  # atan: centres i/32, i = 0..32
TWO_OVER_PI_BITS = 1216  # bits of 2/pi kept for the Payne-Hanek reduction
# exp fast path of the binary32 functions: P of degree 9 with expm1(r) = r + r^2 P(r)
FAST_EXP_RADIUS = 0.35
FAST_EXP_DEGREE = 9
# erf fast path of the binary32 function: one polynomial in d = x - 2.25 on [1/2, 4]
ERF_FAST_MID_CENTRE = 2.25
ERF_FAST_MID_RADIUS = 1.75
ERF_FAST_MID_DEGREE = 28


def _ctx(precision: int) -> gmpy2.context:
    return gmpy2.context(precision=precision, round=gmpy2.RoundToNearest, emin=-10**6, emax=10**6)


def _round(value: mpfr, bits: int = 53) -> float:
    """Round a high-precision value to `bits` significant bits (nearest-even), as a float."""
    with _ctx(bits):
        rounded = mpfr(value)
    result = float(rounded)
    assert mpfr(result, 53) == rounded, "constant not representable in binary64"
    return result


def _split(value: mpfr, hi_bits: int) -> tuple[float, float]:
    """Split value into hi (hi_bits significant bits) + lo (binary64 of the remainder)."""
    hi = _round(value, hi_bits)
    with _ctx(WORK_PRECISION):
        rest = value - mpfr(hi, 53)
    return hi, _round(rest)


def _dd(value: mpfr) -> tuple[float, float]:
    """Double-double representation: hi = RN53(value), lo = RN53(value - hi)."""
    return _split(value, 53)


def _hp(fn: Callable[[], mpfr]) -> mpfr:
    with _ctx(WORK_PRECISION):
        return fn()


def _factorial(n: int) -> int:
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result


def _inverse_factorials(ns: Sequence[int], signs: Sequence[int]) -> list[float]:
    return [
        _round(_hp(lambda n=n, s=s: mpfr(s) / _factorial(n)))
        for n, s in zip(ns, signs, strict=True)
    ]


# --------------------------------------------------------------------------- exp
def exp_constants() -> dict[str, object]:
    ln2 = _hp(lambda: gmpy2.const_log2())
    ln2_n = _hp(lambda: ln2 / EXP_TABLE_SIZE)
    # |k| <= 2^17 after the clamp |x| <= 1000, so k * hi is exact with a 36-bit hi.
    hi, lo = _split(ln2_n, 36)
    table = [_dd(_hp(lambda j=j: gmpy2.exp2(mpfr(j) / EXP_TABLE_SIZE))) for j in range(64)]
    return {
        "EXP_INV_LN2_N": _round(_hp(lambda: EXP_TABLE_SIZE / ln2)),
        "EXP_LN2_N_HI": hi,
        "EXP_LN2_N_LO": lo,
        "EXP_T_HI": [t[0] for t in table],
        "EXP_T_LO": [t[1] for t in table],
        # exp(r) - 1 - r = r^2 * (1/2! + r/3! + ... + r^5/7!)
        "EXP_POLY": _inverse_factorials(range(2, 8), [1] * 6),
    }


# --------------------------------------------------------------------------- log
def _log_invc(i: int) -> float:
    if i in (0, LOG_TABLE_SIZE - 1):
        return 1.0  # so that log is exact-to-relative-precision next to 1
    with _ctx(WORK_PRECISION):
        centre = 1 + (mpfr(i) + mpfr(0.5)) / LOG_TABLE_SIZE
        if i >= LOG_FOLD_INDEX:
            centre = centre / 2
        inverse = 1 / centre
    return _round(inverse, 24)


def log_constants() -> dict[str, object]:
    ln2 = _hp(lambda: gmpy2.const_log2())
    # |e| <= 1075, so e * LOG_LN2_HI is exact with a 42-bit LOG_LN2_HI.
    hi, lo = _split(ln2, 42)
    invc = [_log_invc(i) for i in range(LOG_TABLE_SIZE)]
    logc = [_dd(_hp(lambda c=c: -gmpy2.log(mpfr(c, 53)))) for c in invc]
    # log(1+r) - r + r^2/2 = r^3 * (1/3 - r/4 + r^2/5 - ... - r^7/10)
    poly = [_hp(lambda n=n: mpfr((-1) ** (n + 1)) / n) for n in range(3, 11)]
    return {
        "LOG_LN2_HI": hi,
        "LOG_LN2_LO": lo,
        "LOG_INVC": invc,
        "LOG_LOGC_HI": [c[0] for c in logc],
        "LOG_LOGC_LO": [c[1] for c in logc],
        "LOG_POLY": [_round(p) for p in poly],
    }


# --------------------------------------------------------------------------- sin, cos
def trig_constants() -> dict[str, object]:
    pi = _hp(lambda: gmpy2.const_pi())
    pio2 = _hp(lambda: pi / 2)
    parts: list[float] = []
    rest = pio2
    for bits in (33, 33, 33, 53):
        part = _round(rest, bits)
        parts.append(part)
        rest = _hp(lambda r=rest, p=part: r - mpfr(p, 53))
    with _ctx(TWO_OVER_PI_BITS + 200):
        scaled = 2 / gmpy2.const_pi() * mpfr(2) ** TWO_OVER_PI_BITS
        two_over_pi_bits = int(gmpy2.floor(scaled))
    pio2_hi, pio2_lo = _dd(pio2)
    return {
        "TRIG_TWO_OVER_PI": _round(_hp(lambda: 2 / pi)),
        "TRIG_PIO2_C1": parts[0],
        "TRIG_PIO2_C2": parts[1],
        "TRIG_PIO2_C3": parts[2],
        "TRIG_PIO2_C4": parts[3],
        "TRIG_PIO2_HI": pio2_hi,
        "TRIG_PIO2_LO": pio2_lo,
        "TRIG_TWO_OVER_PI_BITS": two_over_pi_bits,
        # sin(r) = r + r^3 * (-1/3! + r^2/5! - ... + r^16/19!)
        "SIN_POLY": _inverse_factorials(range(3, 20, 2), [(-1) ** n for n in range(1, 10)]),
        # cos(r) = 1 - r^2/2 + r^4 * (1/4! - r^2/6! + ... + r^16/20!)
        "COS_POLY": _inverse_factorials(range(4, 21, 2), [(-1) ** n for n in range(2, 11)]),
    }


# --------------------------------------------------------------------------- erf
def _erf_taylor(centre: float, degree: int) -> list[mpfr]:
    """Taylor coefficients erf^(n)(centre)/n!, n = 0..degree, via Hermite polynomials."""
    with _ctx(WORK_PRECISION):
        a = mpfr(centre, 53)
        hermite = [mpfr(1), 2 * a]
        for k in range(1, degree):
            hermite.append(2 * a * hermite[k] - 2 * k * hermite[k - 1])
        scale = 2 / gmpy2.sqrt(gmpy2.const_pi()) * gmpy2.exp(-a * a)
        coeffs = [gmpy2.erf(a)]
        for n in range(1, degree + 1):
            coeffs.append(scale * (-1) ** (n - 1) * hermite[n - 1] / _factorial(n))
        return coeffs


def erf_constants() -> dict[str, object]:
    two_over_sqrt_pi = _hp(lambda: 2 / gmpy2.sqrt(gmpy2.const_pi()))
    small = [
        _hp(lambda n=n: two_over_sqrt_pi * (-1) ** n / (_factorial(n) * (2 * n + 1)))
        for n in range(ERF_SMALL_TERMS)
    ]
    c0_hi, c0_lo = _dd(small[0])
    centres = [ERF_SMALL_LIMIT + ERF_INTERVAL_WIDTH * (i + 0.5) for i in range(ERF_INTERVALS)]
    taylor = [_erf_taylor(c, ERF_DEGREE) for c in centres]
    return {
        "ERF_SMALL_C0_HI": c0_hi,
        "ERF_SMALL_C0_LO": c0_lo,
        "ERF_SMALL_POLY": [_round(c) for c in small[1:]],
        "ERF_CENTRES": centres,
        "ERF_TAYLOR_C0_HI": [_dd(t[0])[0] for t in taylor],
        "ERF_TAYLOR_C0_LO": [_dd(t[0])[1] for t in taylor],
        "ERF_TAYLOR": [[_round(c) for c in t[1:]] for t in taylor],
    }


def _chebyshev_interpolant(fn: Callable[[mpfr], mpfr], centre: float, radius: float,
                           degree: int) -> list[mpfr]:
    """Power-basis coefficients in d = x - centre of the polynomial of the given degree
    that interpolates fn at the Chebyshev nodes of [centre - radius, centre + radius]
    (close to the minimax polynomial); all arithmetic at WORK_PRECISION."""
    with _ctx(WORK_PRECISION):
        pi = gmpy2.const_pi()
        count = degree + 1
        nodes = [gmpy2.cos(pi * (k + mpfr(1) / 2) / count) for k in range(count)]
        values = [fn(mpfr(centre) + mpfr(radius) * t) for t in nodes]
        # Chebyshev coefficients of the interpolant, then T_j in the power basis of t.
        cheb = []
        for j in range(count):
            total = sum(v * gmpy2.cos(pi * j * (k + mpfr(1) / 2) / count)
                        for k, v in enumerate(values))
            cheb.append(total * 2 / count / (2 if j == 0 else 1))
        power = [mpfr(0)] * count
        previous, current = [mpfr(1)], [mpfr(0), mpfr(1)]
        for j in range(count):
            t_j = previous if j == 0 else current
            for n, c in enumerate(t_j):
                power[n] += cheb[j] * c
            if j >= 1:
                following = [mpfr(0)] + [2 * c for c in current]
                for n, c in enumerate(previous):
                    following[n] -= c
                previous, current = current, following
        return [c / mpfr(radius) ** n for n, c in enumerate(power)]


def _expm1_tail(r: mpfr) -> mpfr:
    """(exp(r) - 1 - r) / r^2; 1/2 + r/6 where |r| is too small for the quotient at the
    working precision (the middle Chebyshev node is cos(pi/2), about 1e-121)."""
    if abs(r) < mpfr(2) ** -100:
        return mpfr(1) / 2 + r / 6
    return (gmpy2.expm1(r) - r) / (r * r)


def fast_f32_constants() -> dict[str, object]:
    mid = _chebyshev_interpolant(gmpy2.erf, ERF_FAST_MID_CENTRE, ERF_FAST_MID_RADIUS,
                                 ERF_FAST_MID_DEGREE)
    tail = _chebyshev_interpolant(_expm1_tail, 0.0, FAST_EXP_RADIUS, FAST_EXP_DEGREE)
    return {
        # exp(r) - 1 - r = r^2 * P(r) for |r| <= ln2/2
        "FAST_EXP_POLY": [_round(c) for c in tail],
        # log(m) = 2s + 2s * z * (1/3 + z/5 + ... + z^8/19), s = (m-1)/(m+1), z = s^2 < 0.0295
        "FAST_LOG_POLY": [_round(_hp(lambda n=n: mpfr(1) / (2 * n + 1))) for n in range(1, 10)],
        "ERF_FAST_MID_CENTRE": ERF_FAST_MID_CENTRE,
        "ERF_FAST_MID_POLY": [_round(c) for c in mid],
    }


# --------------------------------------------------------------------------- atan2
def atan_constants() -> dict[str, object]:
    pi = _hp(lambda: gmpy2.const_pi())
    table = [_dd(_hp(lambda i=i: gmpy2.atan(mpfr(i) / ATAN_TABLE_SIZE))) for i in range(33)]
    pi_hi, pi_lo = _dd(pi)
    return {
        "ATAN_HI": [t[0] for t in table],
        "ATAN_LO": [t[1] for t in table],
        # atan(v) = v + v^3 * (-1/3 + v^2/5 - v^4/7 + v^6/9 - v^8/11)
        "ATAN_POLY": [_round(_hp(lambda n=n: mpfr((-1) ** n) / (2 * n + 1))) for n in range(1, 6)],
        "PI_HI": pi_hi,
        "PI_LO": pi_lo,
        "PI_OVER_4": _round(_hp(lambda: pi / 4)),
        "THREE_PI_OVER_4": _round(_hp(lambda: 3 * pi / 4)),
    }


# --------------------------------------------------------------------------- cbrt
def cbrt_constants() -> dict[str, object]:
    return {"CBRT_ONE_SEVENTH": _round(_hp(lambda: mpfr(1) / 7))}


# --------------------------------------------------------------------------- output
def _fmt(value: float) -> str:
    return f'_h("{value.hex()}")'


def _fmt_value(name: str, value: object) -> list[str]:
    if isinstance(value, int):
        digits = f"{value:x}"
        chunks = [digits[i : i + 64] for i in range(0, len(digits), 64)]
        lines = [f"{name} = int("]
        lines += [f'    "{c}"' for c in chunks]
        lines[-1] += ","
        lines.append("    16,")
        lines.append(")")
        return lines
    if isinstance(value, float):
        return [f"{name} = {_fmt(value)}"]
    assert isinstance(value, list)
    if value and isinstance(value[0], list):
        lines = [f"{name} = ("]
        for row in value:
            lines.append("    (")
            lines += [f"        {_fmt(v)}," for v in row]
            lines.append("    ),")
        lines.append(")")
        return lines
    lines = [f"{name} = ("]
    lines += [f"    {_fmt(v)}," for v in value]
    lines.append(")")
    return lines


HEADER = '''"""Constant tables of the pinned math library.

GENERATED by tools/mathlib_constants.py; do not edit. Every value is an exact binary64
written as a hex-float literal (or an exact integer); the generator defines each one as a
real number rounded to nearest-even (see its source and docs/numerics.md (section 3)).
"""

_h = float.fromhex
'''


def generate() -> str:
    """Return the full text of compiler/numerics/mathlib/constants.py."""
    sections = [
        ("exp", exp_constants()),
        ("log", log_constants()),
        ("sin, cos", trig_constants()),
        ("erf", erf_constants()),
        ("fast paths of the binary32 functions", fast_f32_constants()),
        ("atan2", atan_constants()),
        ("cbrt", cbrt_constants()),
    ]
    geometry = {
        "EXP_TABLE_SIZE": EXP_TABLE_SIZE,
        "LOG_TABLE_SIZE": LOG_TABLE_SIZE,
        "LOG_FOLD_INDEX": LOG_FOLD_INDEX,
        "ERF_SMALL_LIMIT": ERF_SMALL_LIMIT,
        "ERF_INTERVAL_WIDTH": ERF_INTERVAL_WIDTH,
        "ATAN_TABLE_SIZE": ATAN_TABLE_SIZE,
        "TRIG_TWO_OVER_PI_NBITS": TWO_OVER_PI_BITS,
    }
    out = [HEADER]
    out.append("# Table geometry (part of the pinned algorithms).")
    for name, value in geometry.items():
        out.append(f"{name} = {value!r}")
    for title, table in sections:
        out.append("")
        out.append(f"# {'-' * 20} {title}")
        for name, value in table.items():
            out.extend(_fmt_value(name, value))
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the constants module")
    mode.add_argument("--check", action="store_true", help="fail if the module is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.write:
        MODULE_PATH.write_text(text)
        print(f"wrote {MODULE_PATH.name} ({len(text)} bytes)")
        return 0
    if args.check:
        current = MODULE_PATH.read_text() if MODULE_PATH.exists() else ""
        if current != text:
            print("constants.py differs from the generator output", file=sys.stderr)
            return 1
        print("constants.py is up to date")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
