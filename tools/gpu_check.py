"""The device check of the GPU targets: bits on a real NVIDIA GPU against digests made on a CPU.

Two halves, because a GPU machine need not have the compiler's dependencies (nor a network):

  python tools/gpu_check.py bundle DIR [--target nvptx-sm90]     (any machine; no GPU)
      compiles every fixture and every op family's cases for the target into DIR: per case
      the cubin, the plan (JSON), the inputs (raw bytes) and the SHA-256 of every output the
      reference evaluator gives; and a cubin of the 11 correctly rounded binary32 math
      functions over all 2**32 inputs with their reference digests
      (compiler/numerics/mathlib/f32_exceptions.py).

  python3 tools/gpu_check.py run DIR [--skip-math] [--repeat N]  (the GPU machine)
      needs python3 with numpy and cuda-bindings, and this checkout (only
      compiler/codegen/plan.py and compiler/runtime/{grid_runner,cuda_device,stops}.py are
      imported: no LLVM). Runs each case through the same plan runner and driver code as
      `vxla run --target nvptx-sm90` (first run recorded as a CUDA graph, later runs replayed),
      compares every output's SHA-256, runs the math functions over every input, prints the
      GPU, the times and a summary, and exits 1 if any bit differs (2 if no GPU can run the
      bundle's cubins). `make test-gpu` does both halves on a GPU host.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOTAL = 1 << 32
CHUNK = 1 << 24  # the chunk of the math functions' reference digests
MATH_SYMBOL = "vxla_math_{name}"  # void (ptr out, i64 start): out[i] = f(bits(start + i))


# --- bundle (a CPU machine with the compiler) ------------------------------------------------


def family_cases() -> list[tuple[str, str, list[np.ndarray]]]:
    """(name, HLO text, inputs) for each op family: small modules with special values."""
    from tests.codegen.gpu_cases import cases

    return cases()


def bundle(directory: Path, target: str) -> int:
    from compiler.config import load_config
    from compiler.driver import compile_program
    from compiler.program import load_program
    from compiler.reference import evaluate
    from tests.fixture_data import FIXTURE_NAMES, Fixture

    config = load_config().with_target(cpu=target)
    if not config.is_gpu:
        raise SystemExit(f"{target} is not a GPU target")
    (directory / "cases").mkdir(parents=True, exist_ok=True)
    work = [(name, Fixture(name).module_text, Fixture(name).inputs()) for name in FIXTURE_NAMES] + family_cases()
    cases = []
    started = time.monotonic()
    for index, (name, text, inputs) in enumerate(work, 1):
        program = load_program(text)
        executable = compile_program(program, config, cache_dir=False)
        expected = evaluate(program.module, inputs)
        stem = directory / "cases" / name
        stem.with_suffix(".cubin").write_bytes(executable.object_bytes)
        stem.with_suffix(".plan.json").write_text(json.dumps(executable.plan.to_json()))
        np.savez(stem.with_suffix(".inputs.npz"), *[np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in inputs])
        cases.append({"name": name, **executable.hashes, "outputs": [hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest() for o in expected]})
        print(f"  {index}/{len(work)} {name} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    math = _bundle_math(directory, config)
    manifest = {"target": target, "processor": config.target_cpu.processor, "nvjitlink_version": config.nvjitlink_version, "cases": cases, "math": math}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"bundle {directory}: {len(cases)} cases, {len(math['functions'])} math functions for {target}")
    return 0


def _bundle_math(directory: Path, config) -> dict:
    """A cubin with one grid kernel per binary32 function (math_kernels)."""
    from compiler.codegen import nvptx
    from compiler.numerics.mathlib.f32_exceptions import F32_REFERENCE_DIGESTS

    kernels = math_kernels(config, nvptx.NvptxGrid())
    cubin = nvptx.cubin_of(nvptx.ptx_of(kernels.ir_text(), config), config)
    (directory / "math.cubin").write_bytes(cubin)
    return {"cubin": "math.cubin", "functions": dict(F32_REFERENCE_DIGESTS)}


def math_kernels(config, grid_target):
    """A module with a grid entry MATH_SYMBOL per binary32 function of the reference digests:
    thread i of a launch with (out, start) writes f(bits(start + i)), canonical NaN, to
    out[i]. The entries are `grid_target`'s, as every GPU kernel of vxla (the host emulation's
    in tests)."""
    from llvmlite import ir

    from compiler.codegen.grid import GRID_BODY_TYPE, work_item
    from compiler.codegen.kernel import KernelModule
    from compiler.codegen.llvm_ir import FLOAT, I32
    from compiler.codegen.mathlib_ir import math_function
    from compiler.numerics.mathlib.f32_exceptions import F32_REFERENCE_DIGESTS

    kernels = KernelModule(config)
    module = kernels.module
    for name in F32_REFERENCE_DIGESTS:
        function = math_function(module, name, "f32", 1, config)
        body = ir.Function(module, GRID_BODY_TYPE, f"vxla.math_body.{name}")
        body.linkage = "internal"
        out, start, block, block_size, thread = body.args
        b = ir.IRBuilder(body.append_basic_block("entry"))
        item = work_item(b, block, block_size, thread)
        x = b.bitcast(b.trunc(b.add(start, item), I32), FLOAT)
        b.store(b.call(function, [x]), b.gep(out, [item], source_etype=FLOAT), align=4)
        b.ret_void()
        grid_target.define_entry(kernels, MATH_SYMBOL.format(name=name), body)
    return kernels


# --- run (the GPU machine: numpy and cuda-bindings) -------------------------------------------


def run(directory: Path, skip_math: bool, repeat: int, graphs: bool = True) -> int:
    from compiler.errors import TargetNotRunnable
    from compiler.runtime.cuda_device import open_cuda

    manifest = json.loads((directory / "manifest.json").read_text())
    processor, target = manifest["processor"], manifest["target"]
    differing: list[str] = []
    try:
        probe_device = open_cuda(processor, target, (directory / "math.cubin").read_bytes())
    except TargetNotRunnable as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    info = probe_device.info
    print(f"GPU          {info.name}, compute capability {info.compute_capability}, {info.sm_count} SMs, driver {info.driver_version}")
    print(f"bundle       {target}, nvJitLink {manifest['nvjitlink_version']}, {len(manifest['cases'])} cases")
    for case in manifest["cases"]:
        try:
            problem, seconds, graph_error = _run_case(directory, case, processor, target, repeat, graphs)
        except Exception as exc:  # report every case: the first run on a new GPU finds what it finds
            problem, seconds, graph_error = f"{type(exc).__name__}: {exc}", [], ""
        if problem:
            differing.append(f"{case['name']}: {problem}")
        best = f"best {min(seconds) * 1e3:9.3f} ms of {len(seconds)}" if seconds else ""
        print(f"  {case['name']:<40} {'DIFFERS' if problem else 'ok':<8} {best}{'  (no CUDA graph: ' + graph_error + ')' if graph_error else ''}", flush=True)
    math_bad = [] if skip_math else _run_math(probe_device, manifest["math"])
    print(f"cases        {len(manifest['cases']) - len(differing)} of {len(manifest['cases'])} bit-identical to the reference")
    if not skip_math:
        print(f"math         {len(manifest['math']['functions']) - len(math_bad)} of {len(manifest['math']['functions'])} functions give the reference digest on all 2^32 inputs")
    for line in differing + math_bad:
        print(f"DIFFERS      {line}")
    return 1 if differing or math_bad else 0


def _run_case(directory: Path, case: dict, processor: str, target: str, repeat: int, graphs: bool) -> tuple[str, list[float], str]:
    """(what differs or failed, or "", each run's seconds, why CUDA graphs were off): the
    case run `repeat` times on its cubin, every output's SHA-256 compared each time."""
    from compiler.codegen.plan import Plan
    from compiler.runtime.cuda_device import open_cuda
    from compiler.runtime.grid_runner import GridRun, allocate_memory

    stem = directory / "cases" / case["name"]
    device = open_cuda(processor, target, stem.with_suffix(".cubin").read_bytes())
    device.use_graphs = graphs
    plan = Plan.from_json(json.loads(stem.with_suffix(".plan.json").read_text()))
    inputs = np.load(stem.with_suffix(".inputs.npz"))
    memory = allocate_memory(device, plan)
    by_index = {b.input_index: b.id for b in plan.buffers if b.kind == "input"}
    for index, key in enumerate(sorted(inputs.files, key=lambda k: int(k.split("_")[1]))):
        device.upload(memory.inputs[by_index[index]], inputs[key])
    seconds: list[float] = []
    problem = ""
    for attempt in range(repeat):
        began = time.perf_counter()
        run = GridRun(device, plan, memory)
        run.execute(0, len(plan.steps))
        seconds.append(time.perf_counter() - began)
        got = [hashlib.sha256(run.read(b).tobytes()).hexdigest() for b in plan.outputs]
        if got != case["outputs"]:
            bad = [i for i, (g, e) in enumerate(zip(got, case["outputs"], strict=True)) if g != e]
            problem = f"run {attempt + 1}: outputs {bad} differ from the reference"
            break
    memory.release(device)
    return problem, seconds, device.graph_error


def _run_math(device, math: dict) -> list[str]:
    """Each function over all 2**32 inputs, in chunks of 2**24 whose SHA-256s (taken on
    threads while the GPU computes the next chunk: hashlib releases the GIL) combine as the
    reference digests do."""
    from concurrent.futures import ThreadPoolExecutor

    bad = []
    out = device.allocate(CHUNK * 4)
    with ThreadPoolExecutor(max_workers=8) as hashers:
        for name, reference in math["functions"].items():
            began = time.perf_counter()
            try:
                pending = []
                for start in range(0, TOTAL, CHUNK):
                    device.launch(MATH_SYMBOL.format(name=name), CHUNK // 256, 256, out, start)
                    chunk = device.download(out, CHUNK * 4)
                    pending.append(hashers.submit(lambda data: hashlib.sha256(data).digest(), chunk))
                got = hashlib.sha256(b"".join(f.result() for f in pending)).hexdigest()
            except Exception as exc:  # a failing function is reported, the others still run
                got = f"{type(exc).__name__}: {exc}"
            print(f"  {name:<10} {'ok' if got == reference else 'DIFFERS'} {got[:16]} ({time.perf_counter() - began:.1f} s)", flush=True)
            if got != reference:
                bad.append(f"math {name}: digest {got[:64]}, reference {reference[:16]}")
    device.free(out)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("bundle", help="compile the cases and the math kernels (no GPU needed)")
    make.add_argument("directory", type=Path)
    make.add_argument("--target", default="nvptx-sm90", help="GPU target (default nvptx-sm90: H100, H200)")
    check = commands.add_parser("run", help="run a bundle on this machine's GPU and compare every bit")
    check.add_argument("directory", type=Path)
    check.add_argument("--skip-math", action="store_true", help="leave out the 2^32-input math functions")
    check.add_argument("--repeat", type=int, default=3, help="runs per case (the first records the CUDA graph; default 3)")
    check.add_argument("--no-graphs", action="store_true", help="launch every kernel directly (no CUDA graphs)")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        return bundle(args.directory, args.target)
    return run(args.directory, args.skip_math, max(1, args.repeat), graphs=not args.no_graphs)


if __name__ == "__main__":
    sys.exit(main())
