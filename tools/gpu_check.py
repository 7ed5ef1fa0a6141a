"""The device check of the GPU targets: bits on a real NVIDIA GPU against digests made on a CPU.

Two halves, because a GPU machine need not have the compiler's dependencies (nor a network):

  python tools/gpu_check.py bundle DIR [--target nvptx-sm90]     (any machine; no GPU)
      compiles every fixture and every op family's cases for the target into DIR: per case
      the cubin, the plan (JSON), the inputs (raw bytes) and the SHA-256 of every output the
      reference evaluator gives; and a cubin of the 11 correctly rounded binary32 math
      functions over all 2**32 inputs with their reference digests
      (compiler/numerics/mathlib/f32_exceptions.py); and the benchmark programs (an sgemm
      4096^3 and a memory-bound elementwise fusion over 2^26 elements) with the digests of
      their outputs on inputs both halves generate (generated_input), as the CPU backend
      gives them (tested bit for bit against the reference; the reference evaluator would
      take minutes on a 4096^3 dot).

  python3 tools/gpu_check.py run DIR [--skip-math] [--skip-bench] [--repeat N]  (the GPU machine)
      needs python3 with numpy and cuda-bindings, and this checkout (only
      compiler/codegen/plan.py and compiler/runtime/{grid_runner,cuda_device,stops}.py are
      imported: no LLVM). Runs each case through the same plan runner and driver code as
      `vxla run --target nvptx-sm90` (first run recorded as a CUDA graph, later runs replayed),
      once its cubin and plan are checked against its binary_hash, compares every output's
      SHA-256, runs the math functions over every input, prints the GPU, the times and a
      summary, and exits 1 if any bit differs (2 if no GPU can run the bundle's cubins).
      `make test-gpu` does both halves on a GPU host.

      The benchmark (bits checked too) prints: the sgemm's TFLOP/s against cuBLAS SGEMM with
      TF32 off (through CuPy, or PyTorch), the fusion's GB/s against the GPU's device-to-device
      copy and its nominal memory bandwidth, and every case's time against XLA:GPU on the same
      HLO text (jax.jit's compiler, where JAX is installed) with their geometric mean. A
      comparison whose library is missing is reported as not measured, never as a failure.
      Times are the best of --repeat runs, each waited for (stream synchronized).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOTAL = 1 << 32
CHUNK = 1 << 24  # the chunk of the math functions' reference digests
MATH_SYMBOL = "vxla_math_{name}"  # void (ptr out, i64 start): out[i] = f(bits(start + i))
SGEMM_SIZE = 4096  # the sgemm, 4096^3 f32
STREAM_ELEMENTS = 1 << 26  # 256 MiB per array: far beyond any GPU's L2


def bench_programs(n: int = SGEMM_SIZE, m: int = STREAM_ELEMENTS) -> list[dict]:
    """The benchmark programs (an n^3 sgemm, an elementwise fusion over m elements): name,
    HLO text, the shapes of their f32 inputs (generated on both machines: the bundle would not
    carry 768 MiB of inputs) and the work of one run (floating-point operations or bytes moved)."""
    sgemm = f"""HloModule bench_sgemm
ENTRY e {{
  a = f32[{n},{n}]{{1,0}} parameter(0)
  b = f32[{n},{n}]{{1,0}} parameter(1)
  ROOT d = f32[{n},{n}]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""
    stream = f"""HloModule bench_stream
ENTRY e {{
  a = f32[{m}]{{0}} parameter(0)
  b = f32[{m}]{{0}} parameter(1)
  c = f32[{m}]{{0}} parameter(2)
  p = f32[{m}]{{0}} multiply(a, b)
  ROOT s = f32[{m}]{{0}} add(p, c)
}}
"""
    return [
        {"name": f"sgemm_{n}", "text": sgemm, "shapes": [[n, n], [n, n]], "flop": 2 * n**3},
        {"name": "stream_mul_add", "text": stream, "shapes": [[m]] * 3, "bytes": 4 * 4 * m},
    ]


def generated_input(shape: list[int], seed: int) -> np.ndarray:
    """f32 in [-0.5, 0.5) from an integer hash of each element's position and `seed`: the
    same array from any numpy on any machine (no random generator whose stream could change)."""
    x = np.arange(math.prod(shape), dtype=np.uint32) * np.uint32(0x9E3779B1) + np.uint32((seed * 0x85EBCA77) & 0xFFFFFFFF)
    x ^= x >> 16
    x *= np.uint32(0x7FEB352D)
    x ^= x >> 15
    return (((x >> 9) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1.5)).reshape(shape)


# --- bundle (a CPU machine with the compiler) ------------------------------------------------


def family_cases() -> list[tuple[str, str, list[np.ndarray]]]:
    """(name, HLO text, inputs) for each op family: small modules with special values."""
    from harness.gpu_cases import cases

    return cases()


def bundle(directory: Path, target: str) -> int:
    from compiler.api import compile_program, evaluate, load_config, load_program
    from harness.fixture_data import FIXTURE_NAMES, Fixture

    config = load_config().with_target(cpu=target)
    if config.runs_on_host:
        raise SystemExit(f"{target} is not a GPU target")
    (directory / "cases").mkdir(parents=True, exist_ok=True)
    work = [(name, Fixture(name).module_text, Fixture(name).inputs()) for name in FIXTURE_NAMES] + family_cases()
    fixtures = set(FIXTURE_NAMES)
    cases = []
    started = time.monotonic()
    for index, (name, text, inputs) in enumerate(work, 1):
        program = load_program(text)
        executable = compile_program(program, config, cache_dir=False)
        expected = evaluate(program.module, inputs)
        stem = directory / "cases" / name
        _write_case(stem, text, executable)
        np.savez(stem.with_suffix(".inputs.npz"), *[np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in inputs])
        kinds = [{"dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a))} for a in inputs]
        cases.append({"name": name, "fixture": name in fixtures, **executable.hashes, "inputs": kinds, "outputs": _digests(expected)})
        print(f"  {index}/{len(work)} {name} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    math_functions = _bundle_math(directory, config)
    bench = _bundle_bench(directory, config)
    manifest = {
        "target": target,
        "processor": config.target_cpu.processor,
        "linker": f"{config.linker} {config.linker_version}",
        "cases": cases,
        "math": math_functions,
        "bench": bench,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"bundle {directory}: {len(cases)} cases, {len(math_functions['functions'])} math functions, {len(bench)} benchmark programs for {target}")
    return 0


def _write_case(stem: Path, text: str, executable) -> None:
    stem.with_suffix(".hlo").write_text(text)  # for XLA:GPU, the same text
    stem.with_suffix(".cubin").write_bytes(executable.object_bytes)
    stem.with_suffix(".plan.json").write_text(json.dumps(executable.plan.to_json()))


def _digests(arrays) -> list[str]:
    return [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in arrays]


def _bundle_bench(directory: Path, config) -> list[dict]:
    """bench_programs compiled for the GPU, with the digests of their outputs from the host's
    CPU backend on the generated inputs."""
    from compiler.api import compile_program, load_config, load_program

    (directory / "bench").mkdir(parents=True, exist_ok=True)
    entries = []
    for program_spec in bench_programs():
        program = load_program(program_spec["text"])
        executable = compile_program(program, config, cache_dir=False)
        _write_case(directory / "bench" / program_spec["name"], program_spec["text"], executable)
        inputs = [generated_input(shape, seed) for seed, shape in enumerate(program_spec["shapes"])]
        expected = compile_program(program, load_config(), cache_dir=False).run(*inputs)
        entries.append({key: value for key, value in program_spec.items() if key != "text"} | {**executable.hashes, "outputs": _digests(expected)})
        print(f"  bench {program_spec['name']}", file=sys.stderr, flush=True)
    return entries


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


def run(directory: Path, skip_math: bool, repeat: int, graphs: bool = True, skip_bench: bool = False) -> int:
    from compiler.api import TargetNotRunnable
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
    print(f"bundle       {target}, linked by {manifest['linker']}, {len(manifest['cases'])} cases")
    best: dict[str, float] = {}
    for case in manifest["cases"]:
        stem = directory / "cases" / case["name"]
        problem, seconds, graph_error = _checked_case(stem, case["binary_hash"], case["outputs"], lambda stem=stem: _stored_inputs(stem), processor, target, repeat, graphs)
        if problem:
            differing.append(f"{case['name']}: {problem}")
        elif seconds:
            best[case["name"]] = min(seconds)
        timing = f"best {min(seconds) * 1e3:9.3f} ms of {len(seconds)}" if seconds else ""
        print(f"  {case['name']:<40} {'DIFFERS' if problem else 'ok':<8} {timing}{'  (no CUDA graph: ' + graph_error + ')' if graph_error else ''}", flush=True)
    math_bad = [] if skip_math else _run_math(probe_device, manifest["math"])
    if not skip_bench:
        differing += _run_bench(directory, manifest, probe_device, max(repeat, 5), graphs, best)
    print(f"cases        {len(manifest['cases']) - len(differing)} of {len(manifest['cases'])} bit-identical to the reference")
    if not skip_math:
        print(f"math         {len(manifest['math']['functions']) - len(math_bad)} of {len(manifest['math']['functions'])} functions give the reference digest on all 2^32 inputs")
    for line in differing + math_bad:
        print(f"DIFFERS      {line}")
    return 1 if differing or math_bad else 0


def _stored_inputs(stem: Path) -> list[np.ndarray]:
    inputs = np.load(stem.with_suffix(".inputs.npz"))
    return [inputs[key] for key in sorted(inputs.files, key=lambda k: int(k.split("_")[1]))]


def _checked_case(stem: Path, binary: str, expected: list[str], inputs, processor: str, target: str, repeat: int, graphs: bool) -> tuple[str, list[float], str]:
    """_run_case, with any failure reported as the case's problem: the first run on a new
    GPU finds what it finds, and every case still runs."""
    try:
        return _run_case(stem, binary, expected, inputs(), processor, target, repeat, graphs)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", [], ""


def _run_case(stem: Path, binary: str, expected: list[str], inputs: list[np.ndarray], processor: str, target: str, repeat: int, graphs: bool) -> tuple[str, list[float], str]:
    """(what differs, or "", each run's seconds, why CUDA graphs were off): the case's cubin
    and plan, once checked against the case's binary_hash `binary`, run `repeat` times on
    `inputs` (each run waited for), every output's SHA-256 compared with `expected` each time."""
    from compiler.api import Plan, binary_hash
    from compiler.runtime.cuda_device import open_cuda
    from compiler.runtime.grid_runner import GridRun, allocate_memory

    cubin = stem.with_suffix(".cubin").read_bytes()
    plan = Plan.from_json(json.loads(stem.with_suffix(".plan.json").read_text()))
    # The bits checked here vouch for the compiled binary_hash only if these files are its.
    if binary_hash(cubin, plan) != binary:
        return f"its cubin and plan are not its binary_hash {binary[:16]}...", [], ""
    device = open_cuda(processor, target, cubin)
    device.use_graphs = graphs
    memory = allocate_memory(device, plan)
    by_index = {b.input_index: b.id for b in plan.buffers if b.kind == "input"}
    for index, array in enumerate(inputs):
        device.upload(memory.inputs[by_index[index]], np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    seconds: list[float] = []
    problem = ""
    try:
        for attempt in range(repeat):
            began = time.perf_counter()
            run = GridRun(device, plan, memory)
            run.execute(0, len(plan.steps))
            device.synchronize()
            seconds.append(time.perf_counter() - began)
            got = [hashlib.sha256(run.read(b).tobytes()).hexdigest() for b in plan.outputs]
            if got != expected:
                bad = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
                problem = f"run {attempt + 1}: outputs {bad} differ from the reference"
                break
    finally:
        memory.release(device)
    return problem, seconds, device.graph_error


# --- the benchmark (the GPU machine; CuPy or PyTorch, and JAX, where installed) ---------------


def _run_bench(directory: Path, manifest: dict, device, repeat: int, graphs: bool, best: dict[str, float]) -> list[str]:
    """Runs the benchmark programs (bits checked), prints each against its yardstick and
    every case against XLA:GPU; returns what differed."""
    processor, target = manifest["processor"], manifest["target"]
    differing = []
    print(f"benchmark    (best of {repeat} runs, bits checked)")
    for program in manifest["bench"]:
        stem = directory / "bench" / program["name"]
        shapes = program["shapes"]
        problem, seconds, graph_error = _checked_case(stem, program["binary_hash"], program["outputs"], lambda shapes=shapes: _generated(shapes), processor, target, repeat, graphs)
        if problem:
            differing.append(f"{program['name']}: {problem}")
            print(f"  {program['name']:<24} DIFFERS  {problem}", flush=True)
            continue
        ours = min(seconds)
        if "flop" in program:
            yardstick = _measured("cuBLAS SGEMM, TF32 off", lambda shapes=shapes: _cublas_sgemm_seconds(_generated(shapes), repeat))
            print(f"  {program['name']:<24} {program['flop'] / ours / 1e12:7.2f} TFLOP/s ({ours * 1e3:.2f} ms)  {_against(program['flop'], ours, yardstick, 1e12, 'TFLOP/s')}", flush=True)
        else:
            copy = _measured("device-to-device copy", lambda nbytes=program["bytes"] // 2: _copy_seconds(device, nbytes, repeat))
            nominal = _nominal_bandwidth()
            nominal_text = f", {program['bytes'] / ours / nominal:.0%} of the nominal {nominal / 1e9:.0f} GB/s" if nominal else ""
            print(f"  {program['name']:<24} {program['bytes'] / ours / 1e9:7.0f} GB/s ({ours * 1e3:.2f} ms)  {_against(program['bytes'], ours, copy, 1e9, 'GB/s')}{nominal_text}", flush=True)
        if graph_error:
            print(f"    (no CUDA graph: {graph_error})")
    _against_xla(directory, manifest["cases"], best, repeat)
    return differing


def _generated(shapes: list[list[int]]) -> list[np.ndarray]:
    return [generated_input(shape, seed) for seed, shape in enumerate(shapes)]


def _measured(what: str, measure) -> tuple[str, float | None, str]:
    """(what, its seconds or None, why not measured)."""
    try:
        return what, measure(), ""
    except Exception as exc:
        return what, None, f"{type(exc).__name__}: {exc}"


def _against(work: float, ours: float, yardstick: tuple[str, float | None, str], unit: float, unit_name: str) -> str:
    what, theirs, why = yardstick
    if theirs is None:
        return f"{what}: not measured ({why})"
    return f"{what} {work / theirs / unit:.2f} {unit_name}: {theirs / ours:.0%}"


def _cublas_sgemm_seconds(inputs: list[np.ndarray], repeat: int) -> float:
    """The best time of cuBLAS's FP32 SGEMM with TF32 off (CuPy, else PyTorch) on these inputs."""
    a, b = inputs
    os.environ["CUPY_TF32"] = "0"  # CuPy's default too; said, since TF32 would not be FP32
    try:
        import cupy

        x, y = cupy.asarray(a), cupy.asarray(b)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        return _best_between_events(lambda: cupy.matmul(x, y), start, stop, lambda: cupy.cuda.get_elapsed_time(start, stop), repeat)
    except ImportError:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        x, y = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return _best_between_events(lambda: torch.matmul(x, y), start, stop, lambda: start.elapsed_time(stop), repeat)


def _best_between_events(call, start, stop, elapsed_ms, repeat: int) -> float:  # noqa: ANN001 - CuPy's or PyTorch's
    """The best of `repeat` timings of `call()` between two GPU events (after one warm-up)."""
    call()
    times = []
    for _ in range(repeat):
        start.record()
        call()
        stop.record()
        stop.synchronize()
        times.append(elapsed_ms() / 1e3)
    return min(times)


def _copy_seconds(device, nbytes: int, repeat: int) -> float:
    """The best time of one device-to-device copy of nbytes (nbytes read, nbytes written)
    through the same driver stream: the practical ceiling of a memory-bound kernel."""
    source, target = device.allocate(nbytes), device.allocate(nbytes)
    try:
        times = []
        for _ in range(repeat + 1):
            began = time.perf_counter()
            device.copy(target, source, nbytes)
            device.synchronize()
            times.append(time.perf_counter() - began)
        return min(times[1:])
    finally:
        device.free(source)
        device.free(target)


def _nominal_bandwidth() -> float | None:
    """Bytes per second from the GPU's memory clock and bus width, where the driver tells them."""
    try:
        from cuda.bindings import driver

        _, device = driver.cuDeviceGet(0)
        attribute = driver.CUdevice_attribute
        error, clock_khz = driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device)
        error_width, bus_bits = driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device)
        if int(error) or int(error_width) or not clock_khz or not bus_bits:
            return None
        return 2 * clock_khz * 1e3 * bus_bits / 8  # double data rate
    except Exception:
        return None


def _against_xla(directory: Path, cases: list[dict], best: dict[str, float], repeat: int) -> None:
    """Every fixture (programs JAX exported: models, training steps, op mixes) that ran
    bit-identical, against XLA:GPU on the same HLO text and inputs (median of `repeat` runs
    after one warm-up), and the geometric mean of the ratios. The op families' cases are
    vxla's own test modules, left out."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU's memory to both
    try:
        import jax

        jax.devices("gpu")
        from bench.xla_cpu import compile_hlo_text
    except Exception as exc:
        print(f"XLA:GPU      not measured ({type(exc).__name__}: {exc})")
        return
    ratios = []
    print(f"XLA:GPU      jax {jax.__version__}, each fixture's HLO text; ratio = vxla time / XLA:GPU time")
    for case in cases:
        if not case.get("fixture") or case["name"] not in best:
            continue
        stem = directory / "cases" / case["name"]
        try:
            executable = compile_hlo_text(stem.with_suffix(".hlo").read_text(), "gpu")
            on_device = executable.put(_typed_inputs(stem, case["inputs"]))
            executable.run_on_device(on_device)
            times = []
            for _ in range(repeat):
                began = time.perf_counter()
                executable.run_on_device(on_device)
                times.append(time.perf_counter() - began)
            theirs = sorted(times)[len(times) // 2]
        except Exception as exc:
            print(f"  {case['name']:<40} not measured ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})")
            continue
        ratio = best[case["name"]] / theirs
        ratios.append(ratio)
        print(f"  {case['name']:<40} vxla {best[case['name']] * 1e3:9.3f} ms  XLA:GPU {theirs * 1e3:9.3f} ms  {ratio:6.2f}x")
    if ratios:
        print(f"XLA:GPU      geometric mean of {len(ratios)} ratios: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x (vxla / XLA:GPU)")


def _typed_inputs(stem: Path, kinds: list[dict]) -> list[np.ndarray]:
    """The stored inputs (raw bytes) with their dtypes and shapes again (ml_dtypes, which JAX
    brings, names bfloat16 and the narrow types)."""
    try:
        import ml_dtypes  # noqa: F401 (registers its dtypes by name with numpy)

        extra = {name: getattr(ml_dtypes, name) for name in ("bfloat16", "int4", "uint4", "float8_e4m3fn", "float8_e5m2")}
    except ImportError:
        extra = {}
    arrays = []
    for raw, kind in zip(_stored_inputs(stem), kinds, strict=True):
        dtype = np.dtype(extra.get(kind["dtype"], kind["dtype"]))
        arrays.append(raw.view(dtype).reshape(kind["shape"]))
    return arrays


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
    check.add_argument("--skip-bench", action="store_true", help="leave out the benchmark (sgemm, bandwidth, XLA:GPU)")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        return bundle(args.directory, args.target)
    return run(args.directory, args.skip_math, max(1, args.repeat), graphs=not args.no_graphs, skip_bench=args.skip_bench)


if __name__ == "__main__":
    sys.exit(main())
