"""A program's module in parts, compiled at once (compiler/codegen/partition.py,
llvm_workers.py): the parts' objects, mapped together, compute the bits of the one-object
build and of the reference; the bytes do not depend on how many processes made them; and a
damaged object set, a part LLVM refuses and a worker that dies are refused by name."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import pytest

from compiler.codegen import llvm_workers, partition
from compiler.codegen.backend import CPU
from compiler.codegen.objfile import (
    OBJECT_SET_MAGIC,
    pack_objects,
    undefined_symbols,
    unpack_objects,
    unresolved_symbols,
)
from compiler.codegen.target import compile_ir, machine_of
from compiler.config import load_config
from compiler.driver import _generated as generated
from compiler.driver import compile_program
from compiler.errors import BackendError, ConfigError
from compiler.program import Program, load_program
from compiler.reference import evaluate
from compiler.runtime.executable import Executable
from compiler.runtime.loader import LoadError, load_object
from harness.fixture_data import Fixture

FIXTURE = Fixture("mlp_softmax")
SMALL_PARTS = 300  # lines of IR per part: the fixture in many parts


def _bits(arrays) -> list[bytes]:
    return [np.ascontiguousarray(a).tobytes() for a in arrays]


def _program() -> Program:
    return load_program(FIXTURE.module_text)


@pytest.fixture(scope="module")
def whole() -> Executable:
    """The fixture's executable in one object, after the objects of the kernel libraries it
    calls (the f32 gemm, exp's exact path)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition, "PART_LINES", 10**9)
        executable = compile_program(_program(), load_config(), cache_dir=False)
    finished, _, _ = generated(_program(), load_config(), None, CPU)
    assert len(unpack_objects(executable.object_bytes)) == len(finished.libraries) + 1 >= 3
    return executable


def _in_parts(monkeypatch: pytest.MonkeyPatch, jobs: int):
    monkeypatch.setattr(partition, "PART_LINES", SMALL_PARTS)
    monkeypatch.setenv(llvm_workers.JOBS_ENV, str(jobs))
    return compile_program(_program(), load_config(), cache_dir=False)


def test_parts_compute_the_bits_of_one_object_and_of_the_reference(whole: Executable, monkeypatch: pytest.MonkeyPatch) -> None:
    parted = _in_parts(monkeypatch, jobs=3)
    objects = unpack_objects(parted.object_bytes)
    assert len(objects) > 3, f"{len(objects)} parts"
    assert parted.object_bytes.startswith(OBJECT_SET_MAGIC)
    # Parts call each other's kernels: each object leaves symbols to the others, the set none.
    assert any(undefined_symbols(obj) for obj in objects)
    assert unresolved_symbols(parted.object_bytes) == []
    assert parted.plan.canonical_bytes() == whole.plan.canonical_bytes()
    assert parted.hashes["graph_hash"] == whole.hashes["graph_hash"]
    assert parted.hashes["binary_hash"] != whole.hashes["binary_hash"]
    inputs = FIXTURE.inputs()
    expected = _bits(evaluate(_program().module, inputs))
    for threads in (1, 3):
        assert _bits(parted.run(*inputs, threads=threads)) == expected
    assert _bits(whole.run(*inputs)) == expected


def test_the_bytes_do_not_depend_on_how_many_processes_compile_or_when(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts handed to LLVM while the lowering runs are the parts of the finished module."""
    alone = _in_parts(monkeypatch, jobs=1)
    together = _in_parts(monkeypatch, jobs=3)
    assert alone.object_bytes == together.object_bytes
    assert alone.hashes == together.hashes
    config = load_config()
    finished, _, _ = generated(_program(), config, None, CPU)  # no machine code attached
    assert "gemm.f32" in [library.name for library in finished.libraries]
    assert len(partition.split(finished)) + len(finished.libraries) == len(unpack_objects(alone.object_bytes))
    assert CPU.emit_binary(finished, config) == alone.object_bytes


def test_a_worker_reports_what_llvm_refused_and_a_dead_worker_is_named() -> None:
    machine = machine_of(load_config())
    worker = llvm_workers._Worker()
    try:
        with pytest.raises(BackendError, match="LLVM failed on a part of the program: .*parsing error"):
            worker.compile("define void @f( {", machine)
        # The same worker goes on after a refusal.
        assert worker.compile("define void @f() {\n  ret void\n}\n", machine)[:4] == b"\x7fELF"
        worker.process.kill()
        worker.process.wait()
        with pytest.raises(BackendError, match="LLVM worker process ended"):
            worker.compile("define void @f() {\n  ret void\n}\n", machine)
    finally:
        worker.close()


def test_where_no_worker_can_start_this_process_compiles_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that lets no worker start (here: workers that exit at once) costs time, not
    the compile: the calling process takes every part, and makes the same bytes."""
    alone = _in_parts(monkeypatch, jobs=1)
    started = []

    class Failing(llvm_workers._Worker):
        def __init__(self) -> None:
            self.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.started = False
            started.append(self)

    monkeypatch.setattr(llvm_workers, "_IDLE", llvm_workers._Idle())
    monkeypatch.setattr(llvm_workers, "_Worker", Failing)
    assert _in_parts(monkeypatch, jobs=3).object_bytes == alone.object_bytes
    assert started and all(worker.process.returncode == 3 for worker in started)


def test_a_worker_makes_the_bytes_this_process_makes() -> None:
    config = load_config()
    text = "define i32 @twice(i32 %x) {\n  %y = add i32 %x, %x\n  ret i32 %y\n}\n"
    worker = llvm_workers._Worker()
    try:
        assert worker.compile(text, machine_of(config)) == compile_ir(text, config)
    finally:
        worker.close()


def test_llvm_jobs_must_be_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(llvm_workers.JOBS_ENV, "many")
    with pytest.raises(ConfigError, match="VXLA_LLVM_JOBS"):
        llvm_workers.parallelism()
    monkeypatch.setenv(llvm_workers.JOBS_ENV, "2")
    assert llvm_workers.parallelism() == 2


def test_object_sets_are_framed_and_checked() -> None:
    config = load_config()
    caller = compile_ir("declare i32 @callee(i32)\ndefine i32 @entry(i32 %x) {\n  %y = call i32 @callee(i32 %x)\n  ret i32 %y\n}\n", config)
    callee = compile_ir("define i32 @callee(i32 %x) {\n  %y = mul i32 %x, 3\n  ret i32 %y\n}\n", config)
    packed = pack_objects([caller, callee])
    assert unpack_objects(packed) == [caller, callee]
    assert pack_objects([callee]) == callee  # one part is its object alone
    assert unresolved_symbols(packed) == []
    assert unresolved_symbols(pack_objects([caller, caller])) == ["callee", "entry (defined 2 times)"]
    loaded = load_object(packed, config)
    assert loaded.function("entry", ctypes.c_int32, ctypes.c_int32)(14) == 42
    for damaged in (packed[:-1], packed + b"\0", OBJECT_SET_MAGIC + (1).to_bytes(4, "big") + (len(callee)).to_bytes(8, "big") + callee):
        with pytest.raises(LoadError, match="damaged machine code"):
            load_object(damaged, config)


def test_a_program_of_one_part_starts_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small program is one part, compiled by the calling process as soon as it is lowered:
    a worker process could not be done sooner, and would only cost a process start."""
    started = []

    class Counted(llvm_workers._Worker):
        def __init__(self) -> None:
            started.append(self)
            super().__init__()

    monkeypatch.setenv(llvm_workers.JOBS_ENV, "4")
    monkeypatch.setattr(llvm_workers, "_IDLE", llvm_workers._Idle())
    monkeypatch.setattr(llvm_workers, "_Worker", Counted)
    program = load_program("HloModule m\nENTRY e {\n  p = f32[64] parameter(0)\n  ROOT t = f32[64] tanh(p)\n}\n")
    code = CPU.machine_code(load_config())
    generated(program, load_config(), None, CPU, code)
    assert code.parts.handed == 0 and len(code.parts.finish()) == 1  # one part
    inputs = [np.linspace(-3, 3, 64, dtype=np.float32)]
    outputs = compile_program(program, load_config(), cache_dir=False).run(*inputs)
    assert [a.tobytes() for a in outputs] == [a.tobytes() for a in evaluate(program.module, inputs)]
    assert started == []
