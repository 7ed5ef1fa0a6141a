"""Real models (bench/corpus.py's exports) through vxla and through XLA:CPU, with 1 and 2
threads, in one run: run time, the ratio vxla/XLA, cold compile times, vxla's compile-cache
hit, and the largest difference of the outputs.

    python bench/real_models.py CORPUS_DIR [--threads 1 2] [--repeat 7] [--models NAME ...] [--target CPU] [--json PATH]

Every measurement runs in a child process pinned (sched_setaffinity) to as many cores as the
thread count, so XLA:CPU and vxla get the same cores: vxla runs with that many worker threads,
XLA:CPU sizes its own pools to the cores it may use. A sample is as many calls as it takes
to last --min-sample-ms; the time reported is the median per call over --repeat samples.
Cold compile: parse to executable in a fresh process whose imports are done (JAX's CPU client
made too), with a compile cache that holds no program (vxla: parse, verify, passes, LLVM; XLA: HLO text to a
loaded executable). vxla's kernel libraries (the shape-generic gemm and the math functions' exact paths, compiled once per target
and kept in the compile cache, as XLA:CPU ships its runtime's matrix kernels precompiled) are
made first by another process, in a compile cache of their own that each measurement's
cache starts as a copy of, and timed on their own ("libs s": what the very first compile on a
machine adds, at most). First run: the cold compile and one run on the inputs, outputs back as arrays. The cache hit: `compiler.compile` of the
same text again, from a compile cache in a temporary directory, to a loaded executable.
Prints a table; --json writes every figure. Asserts nothing: timings never go in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.target import add_target_argument, resolve_target  # noqa: E402

MAX_RATIO = 1.5  # the bound on any one model, and the geometric mean's bound is 1.0


def _inputs(model_dir: Path) -> list[np.ndarray]:
    with np.load(model_dir / "inputs.npz") as data:
        return [data[f"in{k}"] for k in range(len(data.files))]


def _sample(function: Callable[[], object], repeat: int, min_sample_s: float) -> dict[str, float]:
    function()
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            function()
        elapsed = time.perf_counter() - started
        if elapsed >= min_sample_s or calls >= 1 << 16:
            break
        calls = max(calls * 2, int(calls * min_sample_s / max(elapsed, 1e-9)) + 1)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        times.append((time.perf_counter() - started) / calls)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "calls_per_sample": calls}


def child_libraries(target: str, cache: Path) -> dict:
    """Makes the kernel libraries in `cache` (as a node's first compile, or `make setup`, would)."""
    from compiler.api import prepare_libraries

    started = time.perf_counter()
    prepare_libraries(resolve_target(target), cache_dir=cache)
    return {"libraries_s": time.perf_counter() - started}


def child_vxla(model_dir: Path, threads: int, repeat: int, min_sample_s: float, outputs_path: Path, target: str, libraries: Path) -> dict:
    import compiler
    from compiler.api import compile_program, load_program

    text = (model_dir / "module.hlo").read_text()
    arrays = _inputs(model_dir)
    config = resolve_target(target)
    with tempfile.TemporaryDirectory() as fresh_cache:
        # A compile cache that holds no program, only the kernel libraries an earlier process
        # made (child_libraries).
        shutil.copytree(libraries, Path(fresh_cache) / "libraries")
        started = time.perf_counter()
        program = load_program(text)
        executable = compile_program(program, config, threads=threads, cache_dir=fresh_cache)
        executable.load()
        cold = time.perf_counter() - started
        outputs = executable.run(*arrays)
        first_run = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as cache:
        compiler.compile(text, target=config.cpu, threads=threads, cache_dir=cache)
        started = time.perf_counter()
        compiler.compile(text, target=config.cpu, threads=threads, cache_dir=cache).load()
        hit = time.perf_counter() - started
    np.savez(outputs_path, *outputs)
    timing = _sample(lambda: executable.run(*arrays), repeat, min_sample_s)
    return {"compile_s": cold, "first_run_s": first_run, "cache_hit_ms": hit * 1e3, **timing}


def child_xla(model_dir: Path, repeat: int, min_sample_s: float, outputs_path: Path) -> dict:
    import jax

    from bench.xla_cpu import compile_hlo_text

    text = (model_dir / "module.hlo").read_text()
    arrays = _inputs(model_dir)
    jax.devices("cpu")  # JAX's import and its CPU client are not the compile, as vxla's imports are not
    started = time.perf_counter()
    executable = compile_hlo_text(text)
    cold = time.perf_counter() - started
    outputs = [np.asarray(o) for o in executable.run(arrays)]
    first_run = time.perf_counter() - started
    np.savez(outputs_path, *outputs)
    on_device = executable.put(arrays)
    timing = _sample(lambda: executable.run_on_device(on_device), repeat, min_sample_s)
    return {"compile_s": cold, "first_run_s": first_run, **timing}


def _child(arguments: list[str], threads: int) -> dict:
    """Runs this script's child mode pinned to the first `threads` cores; its JSON answer."""
    cores = sorted(os.sched_getaffinity(0))[:threads]
    environment = {**os.environ, "JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": str(threads)}
    command = [sys.executable, __file__, *arguments] if arguments[0] == "--child" else [sys.executable, __file__, "--child", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return {"error": lines[-1] if lines else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _difference(ours: Path, theirs: Path) -> float:
    """The largest |a - b| / (1 + |b|) over every output element."""
    with np.load(ours) as a, np.load(theirs) as b:
        worst = 0.0
        for key in sorted(a.files):
            x, y = a[key].astype(np.float64), b[key].astype(np.float64)
            finite = np.isfinite(x) & np.isfinite(y)
            if x.shape != y.shape or not np.array_equal(np.isfinite(x), np.isfinite(y)):
                return math.inf
            if finite.any():
                worst = max(worst, float(np.max(np.abs(x[finite] - y[finite]) / (1 + np.abs(y[finite])))))
        return worst


def measure(corpus: Path, names: Sequence[str], thread_counts: Sequence[int], repeat: int, min_sample_ms: float, target: str) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        libraries = Path(scratch) / "cache"
        made = _child(["--child", "libraries", str(libraries), "--target", target], max(thread_counts))
        if "error" in made:
            raise SystemExit(f"the kernel libraries could not be made: {made['error']}")
        print(f"kernel libraries: made in {made['libraries_s']:.2f} s", file=sys.stderr, flush=True)
        for name in names:
            model_dir = corpus / name
            meta = json.loads((model_dir / "model.json").read_text())
            entry: dict = {"name": name, "library": meta["library"], "description": meta["description"], "threads": {}}
            for threads in thread_counts:
                ours, theirs = Path(scratch) / f"{name}-{threads}-vxla.npz", Path(scratch) / f"{name}-{threads}-xla.npz"
                common = [str(model_dir), "--repeat", str(repeat), "--min-sample-ms", str(min_sample_ms)]
                print(f"{name}: {threads} thread(s) ...", file=sys.stderr, flush=True)
                vxla = _child(["vxla", *common, "--threads", str(threads), "--target", target, "--outputs", str(ours), "--libraries", str(libraries / "libraries")], threads)
                vxla.update(made)
                xla = _child(["xla", *common, "--outputs", str(theirs)], threads)
                row: dict = {"vxla": vxla, "xla": xla}
                if "error" not in vxla and "error" not in xla:
                    row["ratio"] = vxla["median_ms"] / xla["median_ms"]
                    row["difference"] = _difference(ours, theirs)
                entry["threads"][str(threads)] = row
            results.append(entry)
    return results


def table(results: list[dict], thread_counts: Sequence[int]) -> str:
    lines = []
    header = f"{'model':<10}" + "".join(f" | {t}T vxla ms  XLA ms  ratio" for t in thread_counts) + " | compile s vxla  XLA | 1st run s vxla  XLA | libs s | cache hit ms | max diff"
    lines.append(header)
    lines.append("-" * len(header))
    for entry in results:
        line = f"{entry['name']:<10}"
        for t in thread_counts:
            row = entry["threads"][str(t)]
            if "ratio" in row:
                line += f" | {row['vxla']['median_ms']:11.2f} {row['xla']['median_ms']:7.2f} {row['ratio']:6.2f}"
            else:
                line += f" | {(row['vxla'].get('error') or row['xla'].get('error'))[:26]:>26}"
        last = entry["threads"][str(thread_counts[-1])]
        if "ratio" in last:
            line += f" | {last['vxla']['compile_s']:9.2f} {last['xla']['compile_s']:5.2f}"
            line += f" | {last['vxla']['first_run_s']:9.2f} {last['xla']['first_run_s']:5.2f}"
            line += f" | {last['vxla']['libraries_s']:6.2f}"
            line += f" | {last['vxla']['cache_hit_ms']:12.1f} | {last['difference']:.1e}"
        lines.append(line)
    for t in thread_counts:
        ratios = [e["threads"][str(t)]["ratio"] for e in results if "ratio" in e["threads"][str(t)]]
        if ratios:
            mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            worst = max(ratios)
            lines.append(f"{t} thread(s): geometric mean vxla/XLA {mean:.2f} over {len(ratios)} models (goal <= 1.0), largest {worst:.2f} (goal <= {MAX_RATIO})")
    compiles = [(e["threads"][str(thread_counts[-1])]) for e in results]
    for key, label in (("compile_s", "cold compile"), ("first_run_s", "first run (compile and one run)")):
        pairs = [(r["vxla"][key], r["xla"][key]) for r in compiles if "ratio" in r]
        if pairs:
            mean = math.exp(sum(math.log(a / b) for a, b in pairs) / len(pairs))
            worst = max(a / b for a, b in pairs)
            lines.append(f"{label}, {thread_counts[-1]} core(s): geometric mean vxla/XLA {mean:.2f} over {len(pairs)} models (goal <= 1.0), largest {worst:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, help="the directory bench/corpus.py wrote")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default: 1 2)")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per measurement (default %(default)s)")
    parser.add_argument("--min-sample-ms", type=float, default=50.0, help="shortest sample (default %(default)s)")
    parser.add_argument("--models", nargs="+", metavar="NAME", help="models to run (default: every one in the corpus)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    add_target_argument(parser)
    parser.add_argument("--child", choices=["vxla", "xla", "libraries"], help=argparse.SUPPRESS)
    parser.add_argument("--outputs", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--libraries", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        model_dir = args.corpus
        if args.child == "libraries":
            answer = child_libraries(args.target, args.corpus)
        elif args.child == "vxla":
            answer = child_vxla(model_dir, args.threads[0], args.repeat, args.min_sample_ms / 1e3, args.outputs, args.target, args.libraries)
        else:
            answer = child_xla(model_dir, args.repeat, args.min_sample_ms / 1e3, args.outputs)
        print(json.dumps(answer))
        return 0
    names = args.models or sorted(p.name for p in args.corpus.iterdir() if (p / "model.json").exists())
    target = resolve_target(args.target).cpu
    print(f"vxla's target: {target}", file=sys.stderr)
    results = measure(args.corpus, names, args.threads, args.repeat, args.min_sample_ms, target)
    print(table(results, args.threads))
    if args.json:
        args.json.write_text(json.dumps({"host": os.uname().machine, "cores": len(os.sched_getaffinity(0)), "target_cpu": target, "models": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
