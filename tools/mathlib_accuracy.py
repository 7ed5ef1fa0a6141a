"""Long-running accuracy checks of the math library against MPFR.

Modes:
  (default)       binary64 pinned functions: max ulp error on --samples inputs per sampler;
                  binary32 correctly rounded functions: mismatches against MPFR on
                  --samples random bit patterns plus the hard-region samples.
  --binary        power and atan2: max ulp error (binary64) on --samples inputs.
  --exhaustive    binary32: every one of the 2**32 inputs (or --range) of one --function,
                  in chunks on --workers processes, against MPFR element by element.
  --fast          the fast paths of the compiled binary32 functions (fast_f32.py): on every
                  input of --range, the max relative error of the approximation against
                  the pinned binary64 function (it must stay below FAST_ERROR) and the
                  share of inputs the fast path decides.

Examples:
  python tools/mathlib_accuracy.py --samples 200000
  python tools/mathlib_accuracy.py --function sin --exhaustive --workers 8
  python tools/mathlib_accuracy.py --function exp --exhaustive --range 3f800000:40000000
  python tools/mathlib_accuracy.py --function tanh --fast --range 0:100000000
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.numerics import mathlib  # noqa: E402
from compiler.numerics.mathlib.mpfr_reference import (  # noqa: E402
    correctly_rounded_f32_array,
    ulp_errors_binary,
    ulp_errors_unary,
)

Sampler = Callable[[np.random.Generator, int], np.ndarray]

# --------------------------------------------------------------------------- samplers


def log_uniform(rng: np.random.Generator, n: int, lo_exp: int, hi_exp: int) -> np.ndarray:
    """|x| = m * 2**e with e uniform in [lo_exp, hi_exp) and m uniform in [1, 2), random sign."""
    e = rng.integers(lo_exp, hi_exp, n)
    m = 1.0 + rng.random(n)
    sign = rng.choice(np.array([-1.0, 1.0]), n)
    with np.errstate(all="ignore"):
        return sign * np.ldexp(m, e)


def random_f64_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniformly random finite binary64 bit patterns (every binade equally likely)."""
    bits = rng.integers(0, 2**64, n, dtype=np.uint64)
    x = bits.view(np.float64)
    return x[np.isfinite(x)]


def random_f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniformly random binary32 bit patterns (NaN and infinities included)."""
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def neighbours(centres: np.ndarray, width: int, dtype: type) -> np.ndarray:
    """For each centre (rounded to dtype), the 2*width consecutive values of its sign."""
    itype = np.int32 if dtype is np.float32 else np.int64
    with np.errstate(all="ignore"):
        c = np.asarray(centres, dtype=dtype)
    base = np.abs(c).view(itype).astype(np.int64)
    bits = base[:, None] + np.arange(-width, width, dtype=np.int64)[None, :]
    bits = np.maximum(bits, 0).astype(itype)
    sign = np.where(np.signbit(c), -1, 1).astype(dtype)[:, None]
    return (bits.view(dtype) * sign).ravel()


def _pio2_multiples(rng: np.random.Generator, n: int, max_exp: int) -> np.ndarray:
    """Values close to k*pi/2 for k log-uniform up to 2**max_exp."""
    k = np.floor(np.exp2(rng.uniform(0, max_exp, n)))
    return k * (np.pi / 2)


# Domain samplers per function, for the binary64 measurements (besides random bits).
F64_DOMAINS: dict[str, list[Sampler]] = {
    "exp": [lambda r, n: r.uniform(-746, 710, n), lambda r, n: log_uniform(r, n, -60, 10)],
    "expm1": [lambda r, n: r.uniform(-45, 710, n), lambda r, n: log_uniform(r, n, -60, 6)],
    "log": [
        lambda r, n: np.abs(log_uniform(r, n, -1074, 1024)),
        lambda r, n: 1.0 + log_uniform(r, n, -60, -1),
    ],
    "log1p": [
        lambda r, n: log_uniform(r, n, -60, 0),
        lambda r, n: np.abs(log_uniform(r, n, -60, 1000)),
        lambda r, n: -1.0 + np.abs(log_uniform(r, n, -52, -1)),
    ],
    "tanh": [lambda r, n: log_uniform(r, n, -60, 5)],
    "logistic": [lambda r, n: r.uniform(-760, 760, n), lambda r, n: log_uniform(r, n, -60, 6)],
    "erf": [lambda r, n: r.uniform(-6.5, 6.5, n), lambda r, n: log_uniform(r, n, -60, 0)],
    "sin": [
        lambda r, n: log_uniform(r, n, -60, 1024),
        lambda r, n: _pio2_multiples(r, n, 60),
        lambda r, n: r.uniform(-10, 10, n),
    ],
    "cos": [
        lambda r, n: log_uniform(r, n, -60, 1024),
        lambda r, n: _pio2_multiples(r, n, 60),
        lambda r, n: r.uniform(-10, 10, n),
    ],
    "rsqrt": [lambda r, n: np.abs(log_uniform(r, n, -1074, 1024))],
    "cbrt": [lambda r, n: log_uniform(r, n, -1074, 1024)],
}

# Centres of hard regions for binary32: thresholds where the result starts to overflow,
# underflow, become subnormal or round to +-1, and arguments close to where the function
# is small relative to its argument.
F32_HARD_CENTRES: dict[str, list[float]] = {
    "exp": [88.72284, -87.33655, -103.27893, -103.97208, 0.0, 1.0, -1.0],
    "expm1": [88.72284, -17.32868, 0.0, 1e-7, -1e-7, 0.6931472],
    "log": [1.0, 0.5, 2.0, 1.4140625, 0.70703125, 1e-38, 3.4e38],
    "log1p": [0.0, -0.999999, 1e-7, 0.4142135, -0.2928932, 3.4e38],
    "tanh": [9.010913, 0.0, 1e-4, 0.5, 0.55],
    "logistic": [-103.97208, -87.33655, 16.635532, 17.32868, 0.0],
    "erf": [3.9193525, 0.0, 0.5, 1e-4, 2.0],
    "sin": [0.0, 1.5707964, 3.1415927, 1e6, 1e20, 3.4e38, 2.0**20, 2.0**24, 2.0**64],
    "cos": [0.0, 1.5707964, 4.712389, 1e6, 1e20, 3.4e38, 2.0**20, 2.0**24, 2.0**64],
    "rsqrt": [1.0, 4.0, 2.0, 1e-45, 1.1754942e-38, 3.4e38],
    "cbrt": [1.0, 8.0, 2.0, 1e-45, 1.1754942e-38, 3.4e38],
}


def f64_samples(name: str, rng: np.random.Generator, n: int) -> Iterator[tuple[str, np.ndarray]]:
    """(label, inputs) pairs for the binary64 measurement of `name`."""
    yield "random bits", random_f64_bits(rng, n)
    for i, sampler in enumerate(F64_DOMAINS[name]):
        yield f"domain {i}", np.asarray(sampler(rng, n), dtype=np.float64)


def f32_hard_samples(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Hard-region binary32 inputs for `name` (about n of them)."""
    centres = np.array(F32_HARD_CENTRES[name], dtype=np.float64)
    width = max(16, n // (4 * len(centres)))
    parts = [neighbours(centres, width, np.float32), neighbours(-centres, width, np.float32)]
    if name in ("sin", "cos"):
        near = _pio2_multiples(rng, n // 4, 126)
        parts.append(neighbours(near, 2, np.float32))
    parts.append(log_uniform(rng, n // 4, -149, -10).astype(np.float32))  # tiny arguments
    return np.concatenate(parts).astype(np.float32)


# --------------------------------------------------------------------------- checks


def f32_mismatches(name: str, x: np.ndarray) -> np.ndarray:
    """Inputs among x where mathlib.unary differs from MPFR's correctly rounded binary32."""
    got = mathlib.unary(name, x).view(np.uint32)
    want = correctly_rounded_f32_array(name, x)
    want_bits = want.view(np.uint32).copy()
    want_bits[np.isnan(want)] = 0x7FC00000  # the contract's canonical NaN
    return x[got != want_bits]


def run_samples(names: list[str], n: int, seed: int) -> None:
    for name in names:
        rng = np.random.default_rng([seed, mathlib.UNARY_FUNCTIONS.index(name)])
        worst = 0.0
        worst_x = 0.0
        t0 = time.time()
        total = 0
        for label, x in f64_samples(name, rng, n):
            err = ulp_errors_unary(name, x, mathlib.unary(name, x))
            i = int(np.argmax(err))
            total += x.size
            print(f"  f64 {name:8s} {label:12s} n={x.size:8d} max {err[i]:.4f} ulp at {x[i]!r}")
            if err[i] > worst:
                worst, worst_x = float(err[i]), float(x[i])
        print(f"f64 {name}: max {worst:.4f} ulp at {worst_x!r} ({total} inputs)")
        x32 = np.concatenate([random_f32_bits(rng, n), f32_hard_samples(name, rng, n)])
        bad = f32_mismatches(name, x32)
        dt = time.time() - t0
        print(f"f32 {name}: {bad.size} mismatches in {x32.size} inputs ({dt:.1f} s)")
        if bad.size:
            print("   first:", [float(v).hex() for v in bad[:8]])


def run_binary(n: int, seed: int) -> None:
    rng = np.random.default_rng([seed, 99])
    for name in ("power", "atan2"):
        worst = 0.0
        for label, a, b in binary_samples(name, rng, n):
            fn = mathlib.power if name == "power" else mathlib.atan2
            err = ulp_errors_binary(name, a, b, fn(a, b))
            i = int(np.argmax(err))
            worst = max(worst, float(err[i]))
            print(f"  f64 {name} {label:14s} n={a.size:8d} max {err[i]:.4f} ulp "
                  f"at ({a[i]!r}, {b[i]!r})")
        print(f"f64 {name}: max {worst:.4f} ulp")


def binary_samples(
    name: str, rng: np.random.Generator, n: int
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(label, a, b) input pairs for power(a, b) or atan2(a, b)."""
    if name == "atan2":
        yield "all binades", log_uniform(rng, n, -1074, 1024), log_uniform(rng, n, -1074, 1024)
        yield "moderate", log_uniform(rng, n, -30, 30), log_uniform(rng, n, -30, 30)
        b = log_uniform(rng, n, -30, 30)
        yield "near diagonal", b * (1.0 + rng.uniform(-0.1, 0.1, n)), b
        return
    x = np.abs(log_uniform(rng, n, -1074, 1024))
    target = rng.uniform(-745, 709.7, n)  # results over the whole binary64 range
    with np.errstate(all="ignore"):
        yield "full range", x, target / np.log(x)
    yield "moderate", np.abs(log_uniform(rng, n, -4, 4)), log_uniform(rng, n, -6, 8)
    near_one = 1.0 + log_uniform(rng, n, -50, -4)
    with np.errstate(all="ignore"):
        yield "near 1, big y", near_one, rng.uniform(-700, 700, n) / np.log(near_one)
    yield "negative x", -np.abs(log_uniform(rng, n, -8, 8)), np.floor(rng.uniform(-60, 60, n))


# --------------------------------------------------------------------------- exhaustive


def _exhaustive_chunk(task: tuple[str, int, int]) -> tuple[int, int, list[int]]:
    name, start, stop = task
    bits = np.arange(start, stop, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    bad = f32_mismatches(name, x)
    return stop - start, bad.size, bad.view(np.uint32)[:16].tolist()


def run_exhaustive(name: str, start: int, stop: int, workers: int, chunk: int) -> int:
    tasks = [(name, s, min(s + chunk, stop)) for s in range(start, stop, chunk)]
    done = 0
    mismatches = 0
    examples: list[int] = []
    t0 = time.time()
    total = stop - start
    print(f"{name}: {total} inputs in {len(tasks)} chunks on {workers} workers", flush=True)
    with multiprocessing.Pool(workers) as pool:
        for k, (count, bad, ex) in enumerate(pool.imap_unordered(_exhaustive_chunk, tasks)):
            done += count
            mismatches += bad
            examples += ex
            if k % max(1, len(tasks) // 100) == 0 or done == total:
                rate = done / max(time.time() - t0, 1e-9)
                eta = (total - done) / rate
                print(f"  {done / total:6.1%}  {done:>11d} done  {mismatches} mismatches  "
                      f"{rate / 1e6:.2f} M/s  eta {eta / 60:.1f} min", flush=True)
    print(f"{name}: {mismatches} mismatches in {total} inputs "
          f"[{start:#010x}, {stop:#010x}) ({(time.time() - t0) / 60:.1f} min)")
    if examples:
        print("  examples:", [f"{b:#010x}" for b in examples[:16]])
    return mismatches


def _fast_chunk(task: tuple[str, int, int]) -> tuple[int, int, float, int]:
    """(inputs, decided, max relative error, input bits where it is reached)."""
    from compiler.numerics.mathlib.correctly_rounded import near_f32_boundary
    from compiler.numerics.mathlib.fast_f32 import FAST_F32, SATURATED
    from compiler.numerics.mathlib.numpy_ops import NUMPY
    from compiler.numerics.mathlib.pinned_f64 import PINNED_F64

    name, start, stop = task
    bits = np.arange(start, stop, dtype=np.uint64).astype(np.uint32)
    with np.errstate(all="ignore"):
        x = bits.view(np.float32).astype(np.float64)
        v, usable = FAST_F32[name](NUMPY, x)
        exact = PINNED_F64[name](x)
        decided = usable & ~near_f32_boundary(NUMPY, v)
        approximated = usable & (np.abs(exact) >= 2.0**-126) & (np.abs(exact) < 2.0**128)
        if name in SATURATED:
            approximated &= ~SATURATED[name](NUMPY, x)
        relative = np.where(approximated, np.abs(v - exact) / np.abs(exact), 0.0)
    worst = int(np.argmax(relative))
    return stop - start, int(decided.sum()), float(relative[worst]), int(bits[worst])


def run_fast(name: str, start: int, stop: int, workers: int, chunk: int) -> int:
    """Measures one fast path on [start, stop); returns 1 if its error bound fails."""
    from compiler.numerics.mathlib.fast_f32 import FAST_ERROR, FAST_F32

    if name not in FAST_F32:
        print(f"{name} has no fast path")
        return 1
    tasks = [(name, s, min(s + chunk, stop)) for s in range(start, stop, chunk)]
    total = decided = 0
    worst, worst_bits = 0.0, 0
    t0 = time.time()
    with multiprocessing.Pool(workers) as pool:
        for k, (count, ok, err, at) in enumerate(pool.imap_unordered(_fast_chunk, tasks), 1):
            total += count
            decided += ok
            if err > worst:
                worst, worst_bits = err, at
            if k % max(1, len(tasks) // 20) == 0 or k == len(tasks):
                print(f"  {total / (stop - start):6.1%} done, max error 2**"
                      f"{np.log2(max(worst, 2.0**-200)):.2f}", flush=True)
    x = np.array([worst_bits], dtype=np.uint32).view(np.float32)[0]
    print(f"{name}: {total} inputs, fast path decides {decided / total:.4%}, max relative "
          f"error 2**{np.log2(max(worst, 2.0**-200)):.2f} at x = {x!r} ({worst_bits:#010x}); "
          f"bound 2**{np.log2(FAST_ERROR):.0f} ({(time.time() - t0) / 60:.1f} min)")
    return 0 if worst <= FAST_ERROR else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function", action="append", choices=mathlib.UNARY_FUNCTIONS)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--binary", action="store_true", help="power and atan2")
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--fast", action="store_true", help="error of the fast paths")
    parser.add_argument("--range", default="0:100000000", help="hex bit-pattern range")
    parser.add_argument("--workers", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--chunk", type=int, default=1 << 22)
    args = parser.parse_args(argv)
    names = args.function or list(mathlib.UNARY_FUNCTIONS)
    if args.fast:
        start, stop = (int(v, 16) for v in args.range.split(":"))
        failed = [run_fast(n, start, stop, args.workers, args.chunk) for n in names]
        return 1 if any(failed) else 0
    if args.exhaustive:
        if len(names) != 1:
            parser.error("--exhaustive takes exactly one --function")
        start, stop = (int(v, 16) for v in args.range.split(":"))
        return 1 if run_exhaustive(names[0], start, stop, args.workers, args.chunk) else 0
    if args.binary:
        run_binary(args.samples, args.seed)
        return 0
    run_samples(names, args.samples, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
