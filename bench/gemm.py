"""sgemm 1024^3 through vxla (every x86 target this host runs), OpenBLAS through numpy (its own
kernel for this CPU and, for the AVX2 comparison, its Haswell kernel) and XLA:CPU (also held
to AVX2 for that comparison: xla:x86-64-v3), with 1 and 2 threads, each in a child process
pinned to that many cores. Prints GFLOP/s and each vxla target against the OpenBLAS kernel
of the same vector width.

    python bench/gemm.py [--size N] [--threads 1 2] [--repeat R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.backend_vs_numpy import best_time  # noqa: E402
from bench.target import XLA_ISA, xla_flags  # noqa: E402

# OpenBLAS kernels by the vxla target of the same vector width.
OPENBLAS_CORE = {"x86-64-v3": "Haswell", "x86-64-v4": "SkylakeX"}


def module_text(size: int) -> str:
    return f"""HloModule sgemm
ENTRY e {{
  a = f32[{size},{size}]{{1,0}} parameter(0)
  b = f32[{size},{size}]{{1,0}} parameter(1)
  ROOT d = f32[{size},{size}]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def child(kind: str, size: int, threads: int, repeat: int) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, size, size), dtype=np.float32)
    if kind.startswith("vxla:"):
        import compiler

        executable = compiler.compile(module_text(size), target=kind.split(":", 1)[1], threads=threads, cache_dir=False)
        return best_time(lambda: executable.run(a, b), repeat)
    if kind.startswith("numpy"):
        return best_time(lambda: a @ b, repeat)
    from bench.xla_cpu import compile_hlo_text

    executable = compile_hlo_text(module_text(size))  # an xla:CPU kind: held to CPU's ISA by _measure
    on_device = executable.put([a, b])
    return best_time(lambda: executable.run_on_device(on_device), repeat)


def _measure(kind: str, size: int, threads: int, repeat: int) -> float | None:
    cores = sorted(os.sched_getaffinity(0))[:threads]
    environment = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "JAX_PLATFORMS": "cpu"}
    if kind.startswith("numpy:"):
        environment["OPENBLAS_CORETYPE"] = kind.split(":", 1)[1]
    if kind.startswith("xla:"):
        environment["XLA_FLAGS"] = xla_flags(kind.split(":", 1)[1], environment.get("XLA_FLAGS", ""))
    command = [sys.executable, __file__, "--child", kind, "--size", str(size), "--threads", str(threads), "--repeat", str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    if done.returncode != 0:
        print(f"{kind}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}", file=sys.stderr)
        return None
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(child(args.child, args.size, args.threads[0], args.repeat))
        return 0
    from compiler.api import load_config, this_host, widest_runnable_cpu

    host = this_host()
    targets = [t for t in OPENBLAS_CORE if host.can_run(load_config().with_target(cpu=t))]
    # XLA:CPU as on a host of each narrower target (the masked view of bench/target.py).
    narrower = [t for t in targets if t != widest_runnable_cpu(host) and t in XLA_ISA]
    kinds = [f"vxla:{t}" for t in targets] + ["numpy"] + [f"numpy:{OPENBLAS_CORE[t]}" for t in targets] + ["xla"] + [f"xla:{t}" for t in narrower]
    flops = 2 * args.size**3
    results: dict[str, dict[str, float | None]] = {}
    for threads in args.threads:
        for kind in kinds:
            seconds = _measure(kind, args.size, threads, args.repeat)
            results.setdefault(kind, {})[str(threads)] = seconds
    print(f"sgemm {args.size}^3, best of {args.repeat}, GFLOP/s (ms)")
    print(f"{'':<22}" + "".join(f"{f'{t} thread(s)':>22}" for t in args.threads))
    for kind in kinds:
        cells = []
        for threads in args.threads:
            seconds = results[kind][str(threads)]
            cells.append(f"{flops / seconds / 1e9:12.1f} ({seconds * 1e3:6.2f})" if seconds else f"{'-':>21}")
        print(f"{kind:<22}" + "".join(f"{c:>22}" for c in cells))
    for target in targets:
        for threads in args.threads:
            ours, theirs = results[f"vxla:{target}"][str(threads)], results[f"numpy:{OPENBLAS_CORE[target]}"][str(threads)]
            if ours and theirs:
                print(f"vxla {target} / OpenBLAS {OPENBLAS_CORE[target]}, {threads} thread(s): {theirs / ours:.0%} of OpenBLAS's speed (goal >= 90%)")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "seconds": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
