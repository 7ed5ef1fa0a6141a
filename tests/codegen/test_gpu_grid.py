"""GPU targets on a host without a GPU: everything up to the cubin, and the grid's logic.

- The targets are in the one table, with nvJitLink's release in their identity.
- Every fixture's PTX passes the contract's checks; its cubin is the same bytes every time
  (tests/codegen/test_fixtures_backend.py holds every fixture's binary_hash on both GPU
  targets against the golden manifest, so the same on every machine).
- The grid runs on the host (compiler/runtime/emulated_grid.py): the kernels, grid bodies,
  slot tables, copies and loops of the GPU build, at several block sizes and with every
  thread in reverse order, give the reference's bits on every fixture, and the op-level trace
  of x86; a wrong work-item index is caught.
- `vxla compile --target nvptx-sm90` prints the hashes; `vxla run` on it exits 2 naming
  what is missing.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from attest.digests import tensor_digest
from compiler.codegen import grid, nvptx
from compiler.codegen.backends import backend_for
from compiler.codegen.plan import GRID_BLOCK_SIZE
from compiler.config import CompilerConfig, ConfigError, load_config
from compiler.driver import compile_emulated_grid, compile_program, generate
from compiler.errors import ExecutionError, TargetNotRunnable
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.runtime import emulated_grid
from compiler.runtime.cuda_device import probe
from compiler.runtime.executable import Executable, Fault
from compiler.runtime.loader import load_object
from compiler.runtime.stops import DeadlineExceeded
from compiler.targets import NVJITLINK_VERSION, TARGET_CPUS
from harness import gpu_cases
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.sampling import share_of
from harness.targets import DEFAULT, config
from node.tracing.statement import build_statement
from tests.codegen.test_fixtures_backend import assert_identical, golden, reference_outputs

VXLA = [sys.executable, "-m", "node.cli"]
GPU_TARGETS = [name for name, cpu in TARGET_CPUS.items() if not cpu.architecture.runs_on_host]


def _has_gpu(target: str) -> bool:
    try:
        probe(config(target))
    except TargetNotRunnable:
        return False
    return True

# The GPU targets' IR differs only in the architecture LLVM and nvJitLink are given, so the
# grid logic is emulated for one of them.
EMULATED = "nvptx-sm90"
LARGE_FIXTURES = ("remat_transformer_train_step", "dropout_train_step", "cnn_maxpool_train_step", "topk_sampling", "large_constant", "map_reduce_variants")
# Whether this host could run EMULATED's cubin (never in CI: the refusal is what is tested).
HAS_GPU = _has_gpu(EMULATED)


def test_the_gpu_targets_are_pinned_with_their_toolchain() -> None:
    assert GPU_TARGETS == ["nvptx-sm90", "nvptx-sm80"]
    for name in GPU_TARGETS:
        gpu = config(name)
        assert not gpu.runs_on_host and gpu.triple == "nvptx64-nvidia-cuda" and gpu.has_fma
        assert (gpu.as_dict()["linker"], gpu.as_dict()["linker_version"]) == ("nvJitLink", NVJITLINK_VERSION)
        assert gpu.digest() != config(DEFAULT).digest()
        assert backend_for(gpu).name == "nvptx"
    # A CPU target's identity is what it was before GPU targets existed.
    assert "linker" not in load_config().as_dict() and "linker_version" not in load_config().as_dict()
    assert config(EMULATED).with_target(cpu=DEFAULT) == config(DEFAULT)
    with pytest.raises(ConfigError, match=f"nvJitLink {NVJITLINK_VERSION}, not the recorded nvJitLink 13.4"):
        CompilerConfig(triple="nvptx64-nvidia-cuda", cpu=EMULATED, linker="nvJitLink", linker_version="13.4")
    with pytest.raises(ConfigError, match="whose code vxla links itself"):
        CompilerConfig(cpu=DEFAULT, linker="nvJitLink", linker_version=NVJITLINK_VERSION)
    with pytest.raises(ConfigError, match="unknown nvptx64 feature"):
        load_config().with_target(cpu=EMULATED, features="+ptx80")
    with pytest.raises(ConfigError, match="schedule perturbation"):
        backend_for(config(EMULATED).with_schedule_perturbation())


@pytest.mark.parametrize(
    "line",
    [
        "\tadd.rn.ftz.f32 \t%f3, %f1, %f2;",
        "\tex2.approx.f32 \t%f2, %f1;",
        "\tatom.global.add.f32 \t%f1, [%rd1], %f2;",
        "\tred.global.add.f64 \t[%rd1], %fd2;",
        "\tmul.f32 \t%f3, %f1, %f2;",
        "\tadd.f64 \t%fd3, %fd1, %fd2;",
        ".extern .func (.param .b32 func_retval0) expf",
    ],
)
def test_ptx_that_would_let_the_hardware_decide_bits_is_refused(line: str) -> None:
    clean = "\tadd.rn.f32 \t%f3, %f1, %f2;\n\tfma.rn.f32 \t%f4, %f1, %f2, %f3;\n\tadd.s64 \t%rd2, %rd1, 4;\n"
    assert nvptx.check_ptx(clean) == []
    problems = nvptx.check_ptx(clean + line + "\n")
    assert len(problems) == 1 and line.strip() in problems[0]


def test_fixture_ptx_is_clean_and_the_cubin_the_same_bytes_every_time() -> None:
    program = load_program(Fixture("transcendentals").module_text)
    gpu = config(EMULATED)
    ir_text, _, _ = generate(program, gpu)
    ptx = nvptx.ptx_of(ir_text, gpu)
    assert nvptx.check_ptx(ptx) == [] and ".entry vxla_grid_" in ptx
    assert all(f"{op}.rn.f64" in ptx for op in ("add", "mul", "div", "sqrt"))  # the math library, rounding named
    first = nvptx.cubin_of(ptx, gpu)
    assert first[:4] == b"\x7fELF" and nvptx.unresolved_symbols(first) == []
    assert nvptx.cubin_of(nvptx.ptx_of(ir_text, gpu), gpu) == first
    # Another process (fresh LLVM and nvJitLink state) makes the same bytes.
    script = (
        "import hashlib; from compiler.driver import compile_program; from compiler.program import load_program; "
        "from harness.fixture_data import Fixture; from harness.targets import config; "
        f"print(compile_program(load_program(Fixture('transcendentals').module_text), config({EMULATED!r}), cache_dir=False).hashes['binary_hash'])"
    )
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert other == compile_program(program, gpu, cache_dir=False).hashes["binary_hash"]


def test_another_nvjitlink_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda.bindings import nvjitlink

    monkeypatch.setattr(nvjitlink, "version", lambda: (13, 4))
    with pytest.raises(ConfigError, match=rf"nvJitLink {NVJITLINK_VERSION}, and nvJitLink 13.4 is installed"):
        nvptx.cubin_of("", config(EMULATED))


def _on_a_fresh_grid(executable: Executable, block_size: int | None) -> Executable:
    """`executable` (of compile_emulated_grid) on a grid of its own: the same object bytes and
    plan (the block size is the launch's, not the compile's), loaded afresh, with fresh host
    memory and launches at `block_size`, so no run sees another's buffers."""
    host = emulated_grid.host_config()
    device = emulated_grid.EmulatedDevice(load_object(executable.object_bytes, host), block_size)
    return Executable(
        executable.program, executable.config, executable.plan, executable.object_bytes, executable.hashes,
        threads=1, device=device, emulated=True,
    )  # fmt: skip


@pytest.mark.parametrize("name", share_of(FIXTURE_NAMES, 3, "emulated grid"))
def test_fixtures_on_the_emulated_grid(name: str) -> None:
    """The GPU build's grid on the host (a rotating third of the fixtures: harness/sampling.py), at the runner's block size and at 7 (no item lines
    up with a block edge), against the reference and the golden output digests."""
    fixture = Fixture(name)
    expected = reference_outputs(fixture)
    assert [tensor_digest(o) for o in expected] == golden()["fixtures"][name]["output_digests"]
    # Block size 7 on the smaller fixtures (the op family cases cover it too): the large ones
    # are the same kernels as the others, at more items.
    executable = compile_emulated_grid(load_program(fixture.module_text), config(EMULATED))
    assert executable.hashes["graph_hash"] == golden()["fixtures"][name]["targets"][EMULATED]["graph_hash"]
    for block_size in (None, 7) if name not in LARGE_FIXTURES else (None,):
        got = _on_a_fresh_grid(executable, block_size).run(*fixture.inputs())
        assert_identical(got, expected, f"{name} emulated grid, block size {block_size or GRID_BLOCK_SIZE}")


def test_a_wrong_work_item_index_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid body that numbers items by the pinned block size instead of the launch's (right
    only while the two agree) gives wrong bits on the emulated grid."""
    fixture = Fixture("mlp_softmax")
    program = load_program(fixture.module_text)
    assert_identical(compile_emulated_grid(program, config(EMULATED), 5).run(*fixture.inputs()), reference_outputs(fixture), "right index")

    def pinned_size(builder, block, block_size, thread):
        return builder.add(builder.mul(block, block.type(GRID_BLOCK_SIZE)), thread)

    monkeypatch.setattr(grid, "work_item", pinned_size)
    got = compile_emulated_grid(program, config(EMULATED), 5).run(*fixture.inputs())
    assert any(g.tobytes() != e.tobytes() for g, e in zip(got, reference_outputs(fixture), strict=True))


def test_the_emulated_grid_traces_as_x86_does() -> None:
    """Every traced instruction has the same digest on the GPU build's grid as on the CPU,
    and a fault injected in one shows in the same place."""
    fixture = Fixture("transformer_block")
    program = load_program(fixture.module_text)
    cpu = compile_program(program, config(DEFAULT), cache_dir=False)
    gpu = compile_emulated_grid(program, config(EMULATED))
    cpu_run, gpu_run = cpu.run_traced(*fixture.inputs()), gpu.run_traced(*fixture.inputs())
    assert len(gpu_run.instructions) > 20 and gpu_run.instructions == cpu_run.instructions
    fault = Fault(next(name for name, opcode, _ in cpu_run.instructions if opcode == "fusion"), 3)
    cpu_faulty, gpu_faulty = cpu.run_traced(*fixture.inputs(), fault=fault), gpu.run_traced(*fixture.inputs(), fault=fault)
    assert gpu_faulty.instructions == cpu_faulty.instructions != cpu_run.instructions
    with pytest.raises(ValueError, match="emulated GPU grid"):
        build_statement(program, gpu, fixture.inputs(), gpu_run, job_id="j", chain_id=None, contract=None, key_id="k", threads=1, timings_ns={}, op_level=True)


def test_loops_stop_on_the_grid_as_on_the_cpu() -> None:
    fixture = Fixture("fori_loop")
    program = load_program(fixture.module_text)
    gpu, cpu = compile_emulated_grid(program, config(EMULATED)), compile_program(program, config(DEFAULT), cache_dir=False)
    for executable in (gpu, cpu):
        with pytest.raises(ExecutionError, match=r"while loop %\S+ ran past the limit of 1 iterations"):
            executable.run(*fixture.inputs(), max_while_iterations=1)
        with pytest.raises(DeadlineExceeded, match=r"run stopped past its deadline, before (%|a buffer copy)"):
            executable.run(*fixture.inputs(), deadline=time.monotonic() - 1)
    assert_identical(gpu.run(*fixture.inputs()), reference_outputs(fixture), "after stopped runs")


def test_the_command_line_compiles_for_a_gpu_and_refuses_to_run_without_one(tmp_path) -> None:
    fixture = Fixture("mlp_softmax")
    module = str(fixture.directory / "module.hlo")
    done = subprocess.run([*VXLA, "compile", module, "--target", EMULATED], capture_output=True, text=True, check=True, cwd=tmp_path)
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    assert lines["binary_hash"] == golden()["fixtures"]["mlp_softmax"]["targets"][EMULATED]["binary_hash"]
    assert lines["target"].startswith("nvptx64-nvidia-cuda cpu=nvptx-sm90")
    run = subprocess.run([*VXLA, "run", module, *map(str, fixture.input_paths()), "--target", EMULATED], capture_output=True, text=True, cwd=tmp_path)
    if HAS_GPU:  # tools/gpu_check.py compares its bits
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode == 2, run.stderr
    assert "target nvptx-sm90 needs an NVIDIA GPU of compute capability 9.0" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_gpu_runtime_loads_nothing_without_a_driver() -> None:
    fixture = Fixture("scan")
    executable = compile_program(load_program(fixture.module_text), config(EMULATED), cache_dir=False)
    if HAS_GPU:
        assert_identical(executable.run(*fixture.inputs()), reference_outputs(fixture), "on the GPU")
        return
    with pytest.raises(TargetNotRunnable, match="needs an NVIDIA GPU of compute capability 9.0"):
        executable.run(*fixture.inputs())
    assert executable.device is None


def test_the_device_side_imports_no_llvm() -> None:
    """A GPU machine runs a bundle with numpy and cuda-bindings alone (tools/gpu_check.py): the
    plan runner, the driver code and the plan import neither llvmlite nor the compiler's
    configuration."""
    script = (
        "import sys\n"
        "sys.modules['llvmlite'] = None\n"
        "sys.modules['ml_dtypes'] = None\n"
        "import compiler.runtime.grid_runner, compiler.runtime.cuda_device, compiler.codegen.plan\n"
        "import tools.gpu_check\n"
        "assert 'compiler.config' not in sys.modules, sorted(m for m in sys.modules if m.startswith('compiler'))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=Fixture("scan").directory.parents[2])


def test_the_device_check_runs_a_bundled_case_only_under_its_binary_hash(tmp_path) -> None:
    """tools/gpu_check.py checks a case's cubin and plan against the binary_hash the bundle
    recorded before it opens the GPU: a plan edited in the bundle (its last step cut) is
    refused by name, so the bits it checks vouch for the binary_hash it names."""
    import json

    from tools import gpu_check

    fixture = Fixture("mlp_softmax")
    executable = compile_program(load_program(fixture.module_text), config(EMULATED), cache_dir=False)
    stem = tmp_path / "mlp_softmax"
    gpu_check._write_case(stem, fixture.module_text, executable)
    binary, processor = executable.hashes["binary_hash"], config(EMULATED).target_cpu.processor

    def problem() -> str:
        return gpu_check._checked_case(stem, binary, [], lambda: [], processor, EMULATED, 1, False)[0]

    assert "binary_hash" not in problem()  # the honest case gets to the GPU (or its absence)
    plan = json.loads(stem.with_suffix(".plan.json").read_text())
    stem.with_suffix(".plan.json").write_text(json.dumps({**plan, "steps": plan["steps"][:-1]}))
    assert problem() == f"its cubin and plan are not its binary_hash {binary[:16]}..."


@pytest.mark.parametrize("case", [name for name, _, _ in gpu_cases.cases()])
def test_every_op_family_case_on_the_emulated_grid(case: str) -> None:
    """The op families' fixed cases (what the device check runs besides the fixtures), with
    special values and extents that leave partial blocks, at block sizes 128 and 3."""
    _, text, inputs = next(c for c in gpu_cases.cases() if c[0] == case)
    program = load_program(text)
    expected = evaluate(program.module, inputs)
    executable = compile_emulated_grid(program, config(EMULATED))
    for block_size in (None, 3):
        got = _on_a_fresh_grid(executable, block_size).run(*inputs)
        assert_identical(got, expected, f"{case} emulated grid, block size {block_size or GRID_BLOCK_SIZE}")


def test_the_device_checks_math_kernels_compute_the_reference_on_the_host_grid() -> None:
    """tools/gpu_check.py's binary32 kernels (what the GPU runs over all 2**32 inputs), on the
    host grid: a launch at `start` computes f(bits(start + i)) for each thread i, the
    reference's bits, across positive and negative values, subnormals, infinities and NaNs."""
    import ctypes

    import numpy as np

    from compiler.codegen.grid import HostGrid
    from compiler.codegen.target import compile_ir
    from compiler.numerics import mathlib
    from compiler.runtime.emulated_grid import host_config
    from compiler.runtime.loader import load_object
    from tools import gpu_check

    kernels = gpu_check.math_kernels(config(EMULATED), HostGrid())
    host = host_config()
    loaded = load_object(compile_ir(kernels.ir_text(), host), host)
    count = 1 << 12
    for name in ("exp", "sin", "cbrt"):
        entry = loaded.function(gpu_check.MATH_SYMBOL.format(name=name), None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
        for start in (0x00000000, 0x3F7FF800, 0x7F7FF800, 0xFF7FF800, 0xFFFFF000):
            out = np.empty(count, np.uint32)
            entry(out.ctypes.data, start, count // 64, 64)
            inputs = (np.arange(count, dtype=np.uint64) + start).astype(np.uint32)
            expected = mathlib.unary(name, inputs.view(np.float32)).view(np.uint32)
            assert np.array_equal(out, expected), (name, hex(start))


def test_the_benchmarks_generated_inputs_are_a_fixed_hash_of_the_position() -> None:
    """The device check generates its benchmark inputs on both machines: each element is the
    integer hash of its position and the input's seed (written out here in Python integers),
    mapped to [-0.5, 0.5)."""
    import numpy as np

    from tools import gpu_check

    def element(position: int, seed: int) -> float:
        x = (position * 0x9E3779B1 + ((seed * 0x85EBCA77) & 0xFFFFFFFF)) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        return float(np.uint32((x >> 9) | 0x3F800000).view(np.float32)) - 1.5

    for seed in (0, 1, 2):
        array = gpu_check.generated_input([3, 5000], seed)
        assert array.shape == (3, 5000) and array.dtype == np.float32
        flat = array.reshape(-1)
        for position in (0, 1, 2, 4999, 14999):
            assert flat[position] == element(position, seed), (seed, position)
        assert flat.min() >= -0.5 and flat.max() < 0.5
    assert not np.array_equal(gpu_check.generated_input([64], 0), gpu_check.generated_input([64], 1))


@pytest.mark.parametrize("program", ["sgemm", "stream_mul_add"])
def test_the_benchmark_programs_on_the_emulated_grid(program: str) -> None:
    """The device check's benchmark programs (smaller, with partial blocks), on the GPU
    build's emulated grid: the bits of the reference, as their digests from the CPU backend."""
    from tools import gpu_check

    spec = next(p for p in gpu_check.bench_programs(n=70, m=1000) if p["name"].startswith(program))
    inputs = [gpu_check.generated_input(shape, seed) for seed, shape in enumerate(spec["shapes"])]
    program_ = load_program(spec["text"])
    expected = evaluate(program_.module, inputs)
    assert_identical(compile_emulated_grid(program_, config(EMULATED), 3).run(*inputs), expected, spec["name"])
