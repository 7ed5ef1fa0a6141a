"""Kernel libraries (compiler/codegen/kernel_library.py). The gemm library
(dot_conv.gemm_library): one function per accumulation type and CPU target runs every gemm
shape. Its row tails and its last panel's vector counts are chosen when it runs, so each of
them is exercised here and must give the reference's bits; programs share the library's
object, which the compile cache keeps, and a damaged stored copy is compiled again, never
used. The exact paths of the binary32 functions (mathlib_ir.exact_library) run from their
libraries with the reference's bits on inputs the fast paths cannot decide."""

from __future__ import annotations

import re

import numpy as np
import pytest

from compiler.codegen import kernel_library, llvm_workers
from compiler.codegen.dot_conv import GemmBlocking, gemm_library
from compiler.codegen.objfile import unpack_objects
from compiler.config import load_config
from compiler.driver import compile_program, generate, prepare_libraries
from compiler.numerics.mathlib.f32_exceptions import F32_EXCEPTIONS
from compiler.program import load_program
from core.dtypes import F32, F64
from harness.targets import GPUS, NATIVE, config, run_everywhere
from tests.codegen.test_gemm_blocking import spread_values

ROWS = (7, 8, 9, 10, 11)  # a full block of 6 and every tail of 1 to 5 rows
COLUMNS = (1, 5, 9, 17, 33, 49, 63, 65, 70)  # every vector count of a last panel, on every target
DEPTH = 70  # two contraction blocks where the panel is 64 wide


def _dots_text(dtype: str) -> str:
    lines, results = [], []
    for m in ROWS:
        for n in COLUMNS:
            lines.append(f"  a{m}_{n} = {dtype}[{m},{DEPTH}] parameter({len(results) * 2})")
            lines.append(f"  w{m}_{n} = {dtype}[{DEPTH},{n}] parameter({len(results) * 2 + 1})")
            lines.append(f"  d{m}_{n} = {dtype}[{m},{n}] dot(a{m}_{n}, w{m}_{n}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
            results.append(f"d{m}_{n}")
    shapes = ", ".join(f"{dtype}[{m},{n}]" for m in ROWS for n in COLUMNS)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(results)})")
    return "HloModule dots\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize("dtype", ["f32", "f64", "s32"])
def test_every_row_tail_and_last_panel_width_keeps_the_reference_bits(dtype: str) -> None:
    rng = np.random.default_rng(len(dtype))
    arrays = []
    for m in ROWS:
        for n in COLUMNS:
            arrays += [spread_values(rng, dtype, (m, DEPTH)), spread_values(rng, dtype, (DEPTH, n))]
    run_everywhere(_dots_text(dtype), arrays)


def test_the_shapes_above_reach_every_variant() -> None:
    # What the test above relies on: on every native target, every row tail and every vector
    # count of a partial last panel occurs.
    for target in NATIVE:
        blocking = GemmBlocking.of(config(target), F32, 1, 8, DEPTH, 8)
        assert {m % blocking.rows for m in ROWS} >= set(range(1, blocking.rows)), target
        widths = {-(-(n % blocking.panel) // blocking.lanes) for n in COLUMNS if n % blocking.panel}
        assert widths == set(range(1, blocking.vectors + 1)), (target, widths)


def _program(m: int, k: int, n: int):
    return load_program(f"""HloModule g
ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
""")


def test_programs_of_different_shapes_share_the_library_object() -> None:
    configuration = load_config()
    library = gemm_library(configuration, F32).made(configuration)
    first = compile_program(_program(13, 70, 40), configuration, cache_dir=False)
    second = compile_program(_program(100, 300, 7), configuration, cache_dir=False)
    assert unpack_objects(first.object_bytes)[0] == unpack_objects(second.object_bytes)[0] == kernel_library.compiled(library, None)
    # Each program's own kernels are its own: the dot kernels hold the shape, not the loops.
    ir_text, _, _ = generate(_program(13, 70, 40), configuration)
    assert 'declare void @"vxla.gemm.f32"' in ir_text and "fma" not in ir_text


def test_the_key_follows_the_target_and_the_accumulation_type() -> None:
    keys = {gemm_library(config(cpu), dtype).made(config(cpu)).key for cpu in ("x86-64-v3", "x86-64-v4") for dtype in (F32, F64)}
    assert len(keys) == 4


def test_the_compile_cache_keeps_the_library_and_refuses_a_damaged_copy(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    configuration = load_config()
    library = gemm_library(configuration, F32).made(configuration)
    monkeypatch.setattr(kernel_library, "_COMPILED", {})
    prepared = prepare_libraries(configuration, cache_dir=tmp_path)
    assert prepared[:2] == ["gemm.f32", "gemm.f64"] and "math.tanh.f32.w1.exact" in prepared
    stored = tmp_path / "libraries" / f"{library.key}.o"
    assert stored.is_file()
    honest = compile_program(_program(13, 70, 40), configuration, cache_dir=False).hashes["binary_hash"]

    # A later process finds it in the cache: no LLVM work for the library.
    monkeypatch.setattr(kernel_library, "_COMPILED", {})
    compiled: list[str] = []
    monkeypatch.setattr(llvm_workers.Compilation, "submit", _recording(compiled))
    assert compile_program(_program(13, 70, 40), configuration, cache_dir=tmp_path).hashes["binary_hash"] == honest
    assert library.ir_text() not in compiled and compiled

    # A damaged copy is compiled again and replaced.
    monkeypatch.setattr(kernel_library, "_COMPILED", {})
    data = bytearray(stored.read_bytes())
    data[-100] ^= 1
    stored.write_bytes(bytes(data))
    compiled.clear()
    program = _program(13, 70, 41)  # not in the cache: compiled, with the library
    assert compile_program(program, configuration, cache_dir=tmp_path).hashes["binary_hash"]
    assert library.ir_text() in compiled
    assert stored.read_bytes() != bytes(data)


_SUBMIT = llvm_workers.Compilation.submit


def _recording(compiled: list[str]):
    """Compilation.submit, noting each IR text handed to LLVM."""

    def submit(self: llvm_workers.Compilation, text: str) -> None:
        compiled.append(text)
        _SUBMIT(self, text)

    return submit


def test_a_gpu_target_keeps_the_gemm_in_its_kernels() -> None:
    for target in GPUS:
        ir_text, _, _ = generate(_program(13, 70, 40), config(target))
        assert "vxla.gemm" not in ir_text and "fma" in ir_text, target


# HLO opcodes of binary32 functions whose exception tables hold inputs the fast path cannot
# decide (they lie next to a rounding boundary), so the exact path, in its library, runs.
EXACT_PATH_OPS = {"logistic": "logistic", "log": "log", "log1p": "log-plus-one", "sin": "sine", "cos": "cosine"}


def test_the_exact_paths_run_from_their_library_with_the_reference_bits() -> None:
    rng = np.random.default_rng(3)
    lines, arrays, results = [], [], []
    for number, (name, opcode) in enumerate(EXACT_PATH_OPS.items()):
        hard = np.array([x for x, _ in F32_EXCEPTIONS[name]], dtype=np.uint32).view(np.float32)
        values = np.concatenate([hard, rng.standard_normal(37).astype(np.float32) * 3, hard[::-1]])
        arrays.append(values)
        lines += [f"  x{number} = f32[{values.size}] parameter({number})", f"  y{number} = f32[{values.size}] {opcode}(x{number})"]
        results.append(f"y{number}")
    shapes = ", ".join(f"f32[{a.size}]" for a in arrays)
    text = "HloModule exact\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT t = ({shapes}) tuple({', '.join(results)})\n}}\n"
    run_everywhere(text, arrays)
    ir_text, _, _ = generate(load_program(text), load_config())
    for name in EXACT_PATH_OPS:
        assert re.search(rf'declare .*@"vxla\.math\.{name}\.f32\.w\d+\.exact"', ir_text), name
        assert not re.search(rf'define .*@"vxla\.math\.{name}\.f32\.w\d+\.exact"', ir_text), name
