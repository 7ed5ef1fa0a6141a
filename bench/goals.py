"""The performance goals in one table, for the host this runs on: `make bench` runs it last.

Each goal's figure comes from the JSON the other benchmarks of the same `make bench` wrote
in .bench-results (bench/gemm.py, bench/models.py, bench/real_models.py), except the per-run
overhead, measured here: a 4-element add through vxla against XLA:CPU on arrays already on
its device, both called in a loop. The host kind is named (AVX2 only, Intel AVX-512, AMD Zen
4 or Zen 5), with the features VXLA_HOST_WITHOUT masks. A goal whose benchmark did not run,
or whose model is not in the corpus, says so. Asserts nothing: timings never go in tests.

    python bench/goals.py [--results DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.gemm import OPENBLAS_CORE  # noqa: E402
from bench.target import add_target_argument, resolve_target  # noqa: E402
from compiler.api import this_host, widest_runnable_cpu  # noqa: E402

TINY = """HloModule tiny
ENTRY e {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} parameter(1)
  ROOT s = f32[4]{0} add(a, b)
}
"""
SMALL_MODELS = ("equinox_mlp",)  # the small-model floor's yardstick


def host_kind(cpuinfo: str, masked: str = "") -> str:
    """The host in the goals' terms, from /proc/cpuinfo's text: vendor, AVX-512 or not, and
    for AMD the Zen generation (family 25 with AVX-512: Zen 4; family 26: Zen 5)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    vendor = fields.get("vendor_id", "")
    family = int(fields.get("cpu family", "0") or 0)
    model = fields.get("model name", "unknown CPU")
    if "avx512f" not in flags:
        kind = "AVX2 only" if "avx2" in flags else "no AVX2"
    elif vendor == "AuthenticAMD":
        kind = {25: "AMD Zen 4 (AVX-512, 256-bit datapath)", 26: "AMD Zen 5 (AVX-512, 512-bit FMA)"}.get(family, f"AMD family {family} (AVX-512)")
    else:
        kind = "Intel AVX-512"
    mask = f"; masked: without {masked}" if masked else ""
    return f"{kind}: {model}{mask}"


def per_call_seconds(function: Callable[[], object], calls: int = 20000, samples: int = 5) -> float:
    """The best per-call time over `samples` loops of `calls` calls (after one warm-up call)."""
    function()
    best = math.inf
    for _ in range(samples):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def run_overhead(target: str) -> dict[str, float]:
    """Seconds per call of the tiny module: vxla with 1 and 2 threads, XLA:CPU on its device."""
    import compiler
    from bench.xla_cpu import compile_hlo_text

    a, b = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
    found = {}
    for threads in (1, 2):
        executable = compiler.compile(TINY, target=target, threads=threads, cache_dir=False)
        found[f"vxla_{threads}"] = per_call_seconds(lambda executable=executable: executable.run(a, b))
    xla = compile_hlo_text(TINY)
    on_device = xla.put([a, b])
    found["xla"] = per_call_seconds(lambda: xla.run_on_device(on_device))
    return found


def _load(directory: Path, name: str) -> dict | None:
    path = directory / name
    return json.loads(path.read_text()) if path.is_file() else None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def goals(results: dict[str, dict | None], overhead: dict[str, float] | None, target: str | None = None, widest: str | None = None) -> list[tuple[str, str, str]]:
    """(goal, figure, verdict) rows of issue 47's goals from the benchmarks' results; GEMM's
    row is vxla's on `target` where gemm.py measured it, else vxla's fastest. `widest`: the
    widest target this host runs (goal 1 asks that it be the default)."""
    rows: list[tuple[str, str, str]] = []

    def verdict(value: float, bound: float, lower_is_better: bool) -> str:
        met = value <= bound if lower_is_better else value >= bound
        return ("met" if met else "not met") + f" (goal {'<=' if lower_is_better else '>='} {bound:g})"

    if target is not None and widest is not None:
        state = "met" if target == widest else f"another target was asked for (--target {target})"
        rows.append(("1 widest target", f"vxla ran {target}; the widest target this host runs is {widest}", state))
    real = results.get("real_models")
    by_name = {entry["name"]: entry for entry in real["models"]} if real else {}
    measured = {name: e["threads"]["2"] for name, e in by_name.items() if "ratio" in e["threads"].get("2", {})}
    for key, label in (("compile_s", "2 cold compile"), ("first_run_s", "2 first run")):
        pairs = [(row["vxla"][key], row["xla"][key]) for row in measured.values() if key in row["vxla"] and key in row["xla"]]
        if pairs:
            mean, worst = _geomean([a / b for a, b in pairs]), max(a / b for a, b in pairs)
            figure = f"geometric mean {mean:.2f}x XLA's time over {len(pairs)} models (2 cores), largest {worst:.2f}x"
            libraries = [row["vxla"]["libraries_s"] for row in measured.values() if "libraries_s" in row["vxla"]]
            if libraries and key == "compile_s":
                figure += f"; the kernel libraries, made once per target before: {statistics.median(libraries):.2f} s"
            rows.append((label, figure, verdict(mean, 1.0, True)))
    for name in SMALL_MODELS:
        row = measured.get(name)
        if row:
            rows.append(("3 small-model floor", f"{name}: {row['ratio']:.2f}x XLA's time (2 threads)", verdict(row["ratio"], 1.2, True)))
        else:
            rows.append(("3 small-model floor", f"{name}: not measured ({'not in the corpus' if name not in by_name else 'failed'})", "-"))
    if overhead:
        ratio = overhead["vxla_2"] / overhead["xla"]
        rows.append(("3 per-run overhead", f"a 4-element add: {overhead['vxla_2'] * 1e6:.1f} us (2 threads), {overhead['vxla_1'] * 1e6:.1f} us (1) vs XLA:CPU {overhead['xla'] * 1e6:.1f} us: {ratio:.2f}x", "-"))
    gemm = results.get("gemm")
    if gemm:
        seconds = gemm["seconds"]
        ours = {k: v["1"] for k, v in seconds.items() if k.startswith("vxla:") and v.get("1")}
        # The masked view (an AVX2 target on a wider host): OpenBLAS's kernel and XLA:CPU held
        # to that target's vector width, where gemm.py measured them.
        masked = target is not None and f"xla:{target}" in seconds
        contenders = (f"numpy:{OPENBLAS_CORE.get(target or '')}", f"xla:{target}") if masked else ("numpy", "xla")
        others = {k: v["1"] for k, v in seconds.items() if v.get("1") and k in contenders}
        if ours and others:
            chosen, time_ours = (f"vxla:{target}", ours[f"vxla:{target}"]) if f"vxla:{target}" in ours else min(ours.items(), key=lambda kv: kv[1])
            best, time_best = min(others.items(), key=lambda kv: kv[1])
            speed = time_best / time_ours
            rows.append(("4 sgemm, 1 core", f"{chosen.removeprefix('vxla:')} at {speed:.0%} of the faster of OpenBLAS and XLA:CPU ({best})", verdict(speed, 0.9, False)))
    models = results.get("models")
    by_model = {r["model"]: r for r in models["results"]} if models else {}
    cnn = by_model.get("cnn")
    if cnn and cnn.get("jax_over_vxla"):
        rows.append(("4 convolution", f"cnn: {1 / cnn['jax_over_vxla']:.2f}x XLA's time", verdict(1 / cnn["jax_over_vxla"], 1.2, True)))
    chain = by_model.get("transcendental_chain")
    if chain:
        vs_numpy = 1 / chain["numpy_over_vxla"]
        text = f"correctly rounded chain {vs_numpy:.2f}x numpy's time"
        if chain.get("jax_over_vxla"):
            text += f", {1 / chain['jax_over_vxla']:.2f}x XLA's approximations' (stretch: 1.5)"
        rows.append(("4 math", text, verdict(vs_numpy, 1.0, True)))
    if measured:
        ratios = [row["ratio"] for row in measured.values()]
        mean, worst = _geomean(ratios), max(ratios)
        rows.append(("5 overall, 2 threads", f"geometric mean {mean:.2f}x XLA's time over {len(ratios)} models, largest {worst:.2f}x", verdict(mean, 0.8, True) + ("" if worst <= 1.2 else "; largest over 1.2")))
    return rows


def targets_used(results: dict[str, dict | None], overhead_target: str) -> str:
    """Which target vxla's rows ran on, from each benchmark's JSON (the same in one make bench)."""
    used = {"per-run overhead": overhead_target}
    for name in ("models", "real_models"):
        data = results.get(name)
        if data:
            used[name] = data.get("target_cpu", "the pinned one (an older result without its target)")
    distinct = sorted(set(used.values()))
    return distinct[0] if len(distinct) == 1 else "; ".join(f"{k} {v}" for k, v in used.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=REPO_ROOT / ".bench-results", help="where make bench wrote the benchmarks' JSON")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the table as JSON")
    add_target_argument(parser)
    args = parser.parse_args(argv)
    target = resolve_target(args.target).cpu
    masked = os.environ.get("VXLA_HOST_WITHOUT", "")
    kind = host_kind(Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else "", masked)
    results = {name: _load(args.results, f"{name}.json") for name in ("gemm", "models", "real_models")}
    try:
        overhead: dict[str, float] | None = run_overhead(target)
    except ImportError as exc:  # no JAX here: the overhead goal is not measured
        print(f"per-run overhead not measured: {exc}", file=sys.stderr)
        overhead = None
    rows = goals(results, overhead, target, widest_runnable_cpu(this_host()))
    print(f"host: {kind}")
    print(f"vxla's target: {targets_used(results, target)} (GEMM's row too, where gemm.py ran it)")
    width = max(len(goal) for goal, _, _ in rows) if rows else 0
    for goal, figure, state in rows:
        print(f"{goal:<{width}}  {figure}  [{state}]")
    missing = [name for name, data in results.items() if data is None]
    if missing:
        print(f"not run: {', '.join(f'{m}.json' for m in missing)} (make bench writes them)")
    if args.json:
        args.json.write_text(json.dumps({"host": kind, "goals": [{"goal": g, "figure": f, "verdict": v} for g, f, v in rows]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
