"""Kernels run with the contract's floating-point environment whatever the caller's MXCSR
says (flush-to-zero, denormals-are-zero), and restore the caller's state afterwards. Every
fixture's object defines every symbol it uses."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import compiler
from compiler.codegen.objfile import undefined_symbols
from compiler.codegen.target import CompilerConfig, compile_ir, load_config
from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.runtime.loader import load_object
from tests.fixture_data import FIXTURE_NAMES, Fixture

MXCSR_IR = """
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i32 @get_mxcsr() {
  %slot = alloca i32
  call void @llvm.x86.sse.stmxcsr(ptr %slot)
  %value = load i32, ptr %slot
  ret i32 %value
}
define void @set_mxcsr(i32 %value) {
  %slot = alloca i32
  store i32 %value, ptr %slot
  call void @llvm.x86.sse.ldmxcsr(ptr %slot)
  ret void
}
"""
FTZ, DAZ = 0x8000, 0x0040


def test_flush_to_zero_in_the_caller_does_not_change_results() -> None:
    text = """HloModule t
ENTRY e {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  m = f32[4]{0} multiply(x, y)
  ROOT a = f32[4]{0} add(m, x)
}
"""
    x = np.array([1e-38, 1e-45, -3e-39, 2.0], dtype=np.float32)
    y = np.array([0.5, 1.0, 0.25, 1e-39], dtype=np.float32)
    expected = evaluate(load_module(text), [x, y])
    executable = compiler.compile(text, cache_dir=False)
    config = CompilerConfig()
    helpers = load_object(compile_ir(MXCSR_IR, config), config)
    get_mxcsr = helpers.function("get_mxcsr", ctypes.c_uint32)
    set_mxcsr = helpers.function("set_mxcsr", None, ctypes.c_uint32)
    original = get_mxcsr()
    try:
        set_mxcsr(original | FTZ | DAZ)
        got = executable.run(x, y)
        after = get_mxcsr()
    finally:
        set_mxcsr(original)
    assert got[0].tobytes() == expected[0].tobytes()
    assert after & (FTZ | DAZ) == FTZ | DAZ  # the caller's state is restored


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_objects_define_every_symbol_they_use(name: str) -> None:
    executable = compile_program(load_program(Fixture(name).module_text), load_config(), cache_dir=False)
    assert undefined_symbols(executable.object_bytes) == []
