"""The binary32 exception tables (compiler/numerics/mathlib/f32_exceptions.py) against the
reference: the inputs where RN32(pinned_f64(x)) is not the correctly rounded result."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from compiler.numerics import mathlib
from compiler.numerics.mathlib import f32_exceptions
from compiler.numerics.mathlib.correctly_rounded import ambiguous, near_f32_boundary
from compiler.numerics.mathlib.f32_exceptions import (
    AMBIGUOUS_COUNTS,
    F32_EXCEPTIONS,
    F32_REFERENCE_DIGESTS,
)
from compiler.numerics.mathlib.mpfr_reference import correctly_rounded_f32_array
from compiler.numerics.mathlib.numpy_ops import NUMPY
from compiler.numerics.mathlib.pinned_f64 import PINNED_F64
from tools import find_f32_exceptions as finder
from tools import mathlib_accuracy as acc

NAMES = mathlib.UNARY_FUNCTIONS


def _double_rounded_bits(name: str, x: np.ndarray) -> np.ndarray:
    """RN32(pinned_f64(x)) as bits, canonical NaN."""
    with np.errstate(all="ignore"):
        r = PINNED_F64[name](x.astype(np.float64)).astype(np.float32)
    out = r.view(np.uint32).copy()
    out[np.isnan(r)] = 0x7FC00000
    return out


def test_every_function_has_a_complete_scan() -> None:
    assert set(F32_EXCEPTIONS) == set(NAMES)
    assert set(AMBIGUOUS_COUNTS) == set(NAMES)
    assert set(F32_REFERENCE_DIGESTS) == set(NAMES)
    assert all(len(d) == 64 for d in F32_REFERENCE_DIGESTS.values())


def test_module_is_as_generated() -> None:
    text = finder.generate_module(
        {n: list(t) for n, t in F32_EXCEPTIONS.items()}, AMBIGUOUS_COUNTS, F32_REFERENCE_DIGESTS
    )
    assert Path(f32_exceptions.__file__).read_text() == text


@pytest.mark.parametrize("name", NAMES)
def test_entries_are_the_reference_and_differ_from_double_rounding(name: str) -> None:
    table = F32_EXCEPTIONS[name]
    inputs = [x for x, _ in table]
    assert inputs == sorted(set(inputs))
    if not table:
        return
    x = np.array(inputs, dtype=np.uint32).view(np.float32)
    want = np.array([y for _, y in table], dtype=np.uint32)
    assert mathlib.unary(name, x).view(np.uint32).tolist() == want.tolist()
    assert correctly_rounded_f32_array(name, x).view(np.uint32).tolist() == want.tolist()
    assert (_double_rounded_bits(name, x) != want).all()


@pytest.mark.parametrize("name", NAMES)
def test_tables_complete_on_sampled_boundary_cases(name: str) -> None:
    """Wherever MPFR disagrees with the double rounding on the ambiguous elements of a
    large sample, the input is in the table (outside the band they agree by construction)."""
    rng = np.random.default_rng([30, NAMES.index(name)])
    x = np.concatenate([acc.random_f32_bits(rng, 1 << 19), acc.f32_hard_samples(name, rng, 50_000)])
    with np.errstate(all="ignore"):
        v = PINNED_F64[name](x.astype(np.float64))
        hard = x[ambiguous(v, v.astype(np.float32))]
    assert hard.size > 0
    correct = correctly_rounded_f32_array(name, hard).view(np.uint32)
    differs = hard.view(np.uint32)[correct != _double_rounded_bits(name, hard)]
    listed = {x for x, _ in F32_EXCEPTIONS[name]}
    assert set(differs.tolist()) <= listed


def test_scan_finds_listed_entries_and_digests_the_reference() -> None:
    """The finder on a small range around a listed input: that entry, and the digest of
    exactly the reference's output."""
    name, (x0, y0) = next((n, t[0]) for n, t in F32_EXCEPTIONS.items() if t)
    start = x0 & ~0xFFF
    found, hard, digest = finder.scan_chunk(name, start, start + 0x1000)
    listed = [[x, y] for x, y in F32_EXCEPTIONS[name] if start <= x < start + 0x1000]
    assert [x0, y0] in found and found == listed and hard >= len(found)
    ref = mathlib.unary(name, finder.chunk_inputs(start, start + 0x1000).view(np.float32))
    assert digest == hashlib.sha256(ref.view(np.uint32).tobytes()).hexdigest()


def test_listed_inputs_are_near_a_boundary() -> None:
    """The compiled functions consult the tables only where near_f32_boundary holds."""
    for name, table in F32_EXCEPTIONS.items():
        if not table:
            continue
        x = np.array([t[0] for t in table], dtype=np.uint32).view(np.float32)
        v = PINNED_F64[name](x.astype(np.float64))
        assert near_f32_boundary(NUMPY, v).all(), name


def test_near_boundary_covers_the_ambiguity_band() -> None:
    rng = np.random.default_rng(31)
    with np.errstate(all="ignore"):
        mid = acc.random_f32_bits(rng, 1 << 16).astype(np.float64)
        mid = mid[np.isfinite(mid)]
        up = np.nextafter(mid.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        centre = (mid + up) / 2  # binary32 midpoints (and the overflow threshold)
        offsets = np.ldexp(rng.uniform(-1.0, 1.0, centre.size), -40) * centre
        v = np.concatenate([centre, centre + offsets, centre * (1 + 2.0**-41),
                            np.exp(rng.uniform(-110.0, 90.0, 1 << 18)), [2.0**128 - 2.0**103]])
        a = ambiguous(v, v.astype(np.float32))
    assert a.sum() > centre.size // 2
    assert not (a & ~near_f32_boundary(NUMPY, v)).any()


def test_tiny_values_are_near_a_boundary_only_near_a_subnormal_midpoint() -> None:
    """Below 2**-126 the binary32 grid is 2**-149 apart: a value is flagged only within
    2**-16 steps of a midpoint (an odd multiple of 2**-150), so a function whose result is
    subnormal (exp of -100) keeps its fast path on almost every lane."""
    rng = np.random.default_rng(5)
    tiny = np.ldexp(rng.uniform(1.0, 2.0, 1 << 16), rng.integers(-160, -127, 1 << 16))
    assert near_f32_boundary(NUMPY, tiny).mean() < 1e-3
    midpoints = np.ldexp(2.0 * rng.integers(0, 1 << 22, 1 << 12) + 1.0, -150)
    for offset in (0.0, 2.0**-41, -(2.0**-41)):  # within the ambiguity band (2**-40 relative)
        assert near_f32_boundary(NUMPY, midpoints * (1 + offset)).all()
    assert not near_f32_boundary(NUMPY, np.ldexp(np.arange(1.0, 1 << 12), -149)).any()  # on the grid
