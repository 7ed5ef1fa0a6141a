"""Checks a compiled binary32 math function on all 2**32 inputs, bit for bit.

The function vxla.math.<name>.f32.w<width> of compiler/codegen/mathlib_ir.py is compiled for
--target inside an array kernel and run over every binary32 bit pattern, in chunks of 2**24
inputs on --workers processes. Two references:

  --reference full    (default) each chunk is also evaluated by the reference,
                      compiler.numerics.mathlib.unary (pinned binary64 evaluation, MPFR near
                      rounding boundaries, canonical NaN), and compared element by element.
                      The reference dominates the time.
  --reference digest  the SHA-256 digests of the compiled output's chunks are combined as
                      tools/find_f32_exceptions.py combines the reference's, and compared with
                      the function's reference digest in compiler/numerics/mathlib/
                      f32_exceptions.py (F32_REFERENCE_DIGESTS). Equal digests mean equal
                      bits on all 2**32 inputs; otherwise the chunks are compared again with
                      the full reference to count the mismatches.

Both modes print the compiled output's digest and whether it equals the reference digest.

  python tools/check_f32_exhaustive.py --function exp --target x86-64-v3 --workers 2
  python tools/check_f32_exhaustive.py --function sin --target x86-64-v4 --reference digest
  QEMU_CPU=max,sve=off .arm64/bin/python tools/check_f32_exhaustive.py --function exp \
      --target neoverse-n1 --reference digest      (AArch64 NEON, emulated)
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attest.digests import digest_of_digests, sha256_hex  # noqa: E402
from compiler.numerics import mathlib  # noqa: E402
from compiler.numerics.mathlib.f32_exceptions import F32_REFERENCE_DIGESTS  # noqa: E402

TOTAL = 1 << 32
CHUNK = 1 << 24  # the chunk of the reference digests
BLOCK = 1 << 16  # inputs per kernel call inside a chunk (cache-sized buffers)

_kernel = None  # per worker process: (loaded object, ctypes function)


def compile_kernel(name: str, target: str, width: int):
    """(loaded object, ctypes callable kernel(in, out, n)) of the binary32 function."""
    import llvmlite.ir as ir

    from compiler.api import load_config
    from compiler.codegen.mathlib_ir import define_array_kernel
    from compiler.codegen.target import compile_ir
    from compiler.runtime.loader import load_object

    config = load_config().with_target(cpu=target)
    module = ir.Module(name=f"check_{name}")
    define_array_kernel(module, "kernel", name, "f32", width, config)
    loaded = load_object(compile_ir(str(module), config), config)
    fn = loaded.function("kernel", None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    return loaded, fn


def _init(name: str, target: str, width: int) -> None:
    global _kernel
    _kernel = compile_kernel(name, target, width)


def compiled_chunk(start: int) -> np.ndarray:
    """The compiled function's output bits for the inputs start .. start + CHUNK - 1."""
    _, fn = _kernel
    x = np.arange(CHUNK, dtype=np.uint32) + np.uint32(start)
    out = np.empty(CHUNK, dtype=np.uint32)
    for s in range(0, CHUNK, BLOCK):
        xs = x[s : s + BLOCK]
        fn(xs.ctypes.data, out[s:].ctypes.data, xs.size)
    return out


def reference_chunk(name: str, start: int) -> np.ndarray:
    """The reference's output bits (canonical NaN) for one chunk."""
    x = np.arange(CHUNK, dtype=np.uint32) + np.uint32(start)
    return mathlib.unary(name, x.view(np.float32)).view(np.uint32)


def _task(args: tuple[str, int, bool]) -> tuple[int, str, int, list[tuple[int, int, int]]]:
    name, start, compare = args
    got = compiled_chunk(start)
    digest = sha256_hex(got.tobytes())
    if not compare:
        return start, digest, -1, []
    want = reference_chunk(name, start)
    bad = np.flatnonzero(got != want)
    examples = [(start + int(i), int(got[i]), int(want[i])) for i in bad[:4].tolist()]
    return start, digest, int(bad.size), examples


def _run(name: str, starts: list[int], compare: bool, workers: int, target: str,
         width: int) -> tuple[dict[int, str], int, list[tuple[int, int, int]]]:
    digests: dict[int, str] = {}
    mismatches = 0
    examples: list[tuple[int, int, int]] = []
    t0 = time.time()
    tasks = [(name, s, compare) for s in starts]
    with multiprocessing.Pool(workers, initializer=_init, initargs=(name, target, width)) as pool:
        for k, (start, digest, bad, ex) in enumerate(pool.imap_unordered(_task, tasks), 1):
            digests[start] = digest
            mismatches += max(bad, 0)
            examples += ex
            if k % max(1, len(tasks) // 32) == 0 or k == len(tasks):
                rate = k * CHUNK / (time.time() - t0)
                print(f"  {name} {target}: {k}/{len(tasks)} chunks, "
                      f"{mismatches if compare else '-'} mismatches, {rate / 1e6:.1f} M/s, "
                      f"eta {(len(tasks) - k) * CHUNK / rate / 60:.1f} min", flush=True)
    return digests, mismatches, examples


def function_digest(digests: dict[int, str]) -> str:
    """The chunk digests combined in input order (as tools/find_f32_exceptions.py)."""
    return digest_of_digests([digests[s] for s in range(0, TOTAL, CHUNK)])


def check(name: str, target: str, width: int, workers: int, reference: str) -> int:
    """Runs the check; prints a summary line and returns the number of mismatches."""
    t0 = time.time()
    starts = list(range(0, TOTAL, CHUNK))
    want_digest = F32_REFERENCE_DIGESTS.get(name)
    if reference == "digest" and want_digest is None:
        raise SystemExit(f"no reference digest for {name}: run tools/find_f32_exceptions.py")
    print(f"{name}: all {TOTAL} binary32 inputs, {target}, width {width}, "
          f"{workers} workers, reference {reference}", flush=True)
    digests, mismatches, examples = _run(name, starts, reference == "full", workers, target,
                                         width)
    digest = function_digest(digests)
    same = digest == want_digest
    if reference == "digest" and not same:
        print(f"  {name}: digest differs; comparing every chunk with the full reference")
        _, mismatches, examples = _run(name, starts, True, workers, target, width)
    elapsed = time.time() - t0
    print(f"{name} f32 {target} w{width}: {TOTAL} inputs, {mismatches} mismatches, "
          f"{elapsed:.0f} s ({reference} reference); output digest {digest[:16]}... "
          f"{'equals' if same else 'DIFFERS FROM'} the reference digest", flush=True)
    for x, got, want in sorted(examples)[:10]:
        print(f"    x={x:#010x} got {got:#010x} want {want:#010x}")
    return mismatches if same or reference == "full" else max(mismatches, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function", required=True, choices=mathlib.UNARY_FUNCTIONS)
    parser.add_argument("--target", default="x86-64-v3", help="pinned CPU name (neoverse-n1 and "
                        "neoverse-v1 run under .arm64/bin/python, see make arm64)")
    parser.add_argument("--width", type=int, default=0, help="vector width (default: one "
                        "vector register of f32 on the target, at least 4)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reference", choices=("full", "digest"), default="full")
    args = parser.parse_args(argv)
    from compiler.api import load_config

    width = args.width or max(4, load_config().with_target(cpu=args.target).vector_bits // 32)
    return 1 if check(args.function, args.target, width, args.workers, args.reference) else 0


if __name__ == "__main__":
    sys.exit(main())
