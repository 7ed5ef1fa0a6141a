"""The LLVM backend against numpy (and jax.jit on CPU, when JAX is installed) on elementwise
chains, reductions and a 1024x1024x1024 f32 dot, in the same process. Prints times and
ratios; it asserts nothing.

    .venv/bin/python bench/backend_vs_numpy.py [--threads N] [--repeat R] [--target CPU]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import compiler

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.target import add_target_argument, resolve_target  # noqa: E402
from harness.hlo_fragments import ADD_F32, elementwise_chain, scalar_binary  # noqa: E402

# Five elementwise ops on two 4M f32 arrays (loop fusion makes them one fusion).
ELEMENTWISE_CHAIN = elementwise_chain("chain", 4194304)

# The transcendental chain: tanh, exp, a product and the mean of 2048x2048 f32 (the
# correctly rounded functions on their fast paths, fused with the reduction).
TRANSCENDENTAL_CHAIN = "HloModule transcendental_chain\n" + ADD_F32 + """ENTRY e {
  x = f32[2048,2048]{1,0} parameter(0)
  t = f32[2048,2048]{1,0} tanh(x)
  e = f32[2048,2048]{1,0} exponential(t)
  p = f32[2048,2048]{1,0} multiply(t, e)
  z = f32[] constant(0)
  s = f32[] reduce(p, z), dimensions={0,1}, to_apply=add
  n = f32[] constant(4194304)
  ROOT m = f32[] divide(s, n)
}
"""

ROW_SUM = "HloModule rows\n" + ADD_F32 + """ENTRY e {
  x = f32[2048,2048]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2048]{0} reduce(x, z), dimensions={1}, to_apply=add
}
"""

FULL_MAX = "HloModule full\n" + scalar_binary("mx", "f32", "maximum") + """ENTRY e {
  x = f32[4194304]{0} parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=mx
}
"""

DOT = """HloModule dot
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  ROOT d = f32[1024,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

TANH = """HloModule tanh
ENTRY e {
  x = f32[1048576]{0} parameter(0)
  ROOT t = f32[1048576]{0} tanh(x)
}
"""


def best_time(function: Callable[[], object], repeat: int) -> float:
    function()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def jax_function(kind: str):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    functions = {
        "chain": lambda x, y: (jnp.maximum(x * y + x, y) - x * y) ** 2,
        "rows": lambda x: jnp.sum(x, axis=1),
        "full": lambda x: jnp.max(x),
        "dot": lambda a, b: a @ b,
        "tanh": jnp.tanh,
    }
    compiled = jax.jit(functions[kind])
    return lambda *args: compiled(*args).block_until_ready()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    add_target_argument(parser)
    args = parser.parse_args()
    target = resolve_target(args.target).cpu
    rng = np.random.default_rng(0)
    x4m, y4m = rng.standard_normal((2, 4194304), dtype=np.float32)
    square = rng.standard_normal((2048, 2048), dtype=np.float32)
    a, b = rng.standard_normal((2, 1024, 1024), dtype=np.float32)
    x1m = rng.standard_normal(1048576, dtype=np.float32) * 4
    cases = [
        ("elementwise chain, 5 ops on 4M f32", "chain", ELEMENTWISE_CHAIN, (x4m, y4m), lambda x, y: np.square(np.maximum(x * y + x, y) - x * y), None),
        ("row sums, 2048x2048 f32", "rows", ROW_SUM, (square,), lambda x: x.sum(axis=1), None),
        ("max of 4M f32", "full", FULL_MAX, (x4m,), lambda x: x.max(), None),
        ("dot 1024x1024x1024 f32", "dot", DOT, (a, b), lambda p, q: p @ q, 2 * 1024**3),
        ("tanh of 1M f32 (correctly rounded)", "tanh", TANH, (x1m,), np.tanh, None),
    ]
    print(f"threads={args.threads}; target {target}; best of {args.repeat}; ratio = numpy time / vxla time (>1: vxla faster)")
    print(f"{'case':<40} {'vxla ms':>9} {'numpy ms':>9} {'ratio':>7} {'jax ms':>9} {'jax/vxla':>9}")
    for label, kind, text, inputs, reference, flops in cases:
        executable = compiler.compile(text, target=target, threads=args.threads, cache_dir=False)
        ours = best_time(lambda e=executable, i=inputs: e.run(*i), args.repeat)
        theirs = best_time(lambda r=reference, i=inputs: r(*i), args.repeat)
        jax_call = jax_function(kind)
        jax_time = best_time(lambda f=jax_call, i=inputs: f(*i), args.repeat) if jax_call else None
        line = f"{label:<40} {ours * 1e3:9.2f} {theirs * 1e3:9.2f} {theirs / ours:7.2f}"
        line += f" {jax_time * 1e3:9.2f} {jax_time / ours:9.2f}" if jax_time else f" {'-':>9} {'-':>9}"
        if flops:
            line += f"   vxla {flops / ours / 1e9:.1f} GFLOP/s, numpy {flops / theirs / 1e9:.1f} GFLOP/s ({theirs / ours:.0%})"
        print(line)


if __name__ == "__main__":
    main()
