"""Kernels run with the contract's floating-point environment whatever the caller's state
says (MXCSR flush-to-zero and denormals-are-zero on x86; FPCR flush-to-zero and round towards
zero on AArch64), and restore the caller's state afterwards. An object that uses a symbol it
does not define (a libm function, a compiler runtime helper) is refused."""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np
import pytest
from llvmlite import ir

import compiler
from compiler import driver
from compiler.codegen.backends import backend_for
from compiler.codegen.llvm_ir import DOUBLE
from compiler.codegen.target import compile_ir
from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.runtime.loader import load_object
from harness.fixture_data import Fixture
from harness.targets import DEFAULT
from harness.targets import config as target_config

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
FPCR_IR = """
declare i64 @llvm.aarch64.get.fpcr()
declare void @llvm.aarch64.set.fpcr(i64)
define i64 @get_fpcr() {
  %value = call i64 @llvm.aarch64.get.fpcr()
  ret i64 %value
}
define void @set_fpcr(i64 %value) {
  call void @llvm.aarch64.set.fpcr(i64 %value)
  ret void
}
"""
FPCR_FZ, FPCR_ROUND_TO_ZERO = 1 << 24, 3 << 22


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
    executable = compiler.compile(text, target=DEFAULT, cache_dir=False)
    config = target_config(DEFAULT)
    if config.arch == "aarch64":
        helpers = load_object(compile_ir(FPCR_IR, config), config)
        get_state = helpers.function("get_fpcr", ctypes.c_uint64)
        set_state = helpers.function("set_fpcr", None, ctypes.c_uint64)
        hostile = FPCR_FZ | FPCR_ROUND_TO_ZERO
    else:
        helpers = load_object(compile_ir(MXCSR_IR, config), config)
        get_state = helpers.function("get_mxcsr", ctypes.c_uint32)
        set_state = helpers.function("set_mxcsr", None, ctypes.c_uint32)
        hostile = FTZ | DAZ
    original = get_state()
    try:
        set_state(original | hostile)
        got = executable.run(x, y)
        after = get_state()
    finally:
        set_state(original)
    assert got[0].tobytes() == expected[0].tobytes()
    assert after & hostile == hostile  # the caller's state is restored


def test_an_object_using_a_symbol_it_does_not_define_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Such a symbol (libm's cos here) would come from whatever the host process provides.
    Every compile is checked, so every fixture on every target is (test_fixtures_backend)."""
    cpu = backend_for(target_config(DEFAULT))

    def entry_and_a_function_calling_cos(kernels, plan) -> None:  # noqa: ANN001
        cpu.emit_entry(kernels, plan)
        cos = ir.Function(kernels.module, ir.FunctionType(DOUBLE, [DOUBLE]), "cos")
        uses_cos = ir.Function(kernels.module, ir.FunctionType(DOUBLE, [DOUBLE]), "uses_cos")
        builder = ir.IRBuilder(uses_cos.append_basic_block("entry"))
        builder.ret(builder.call(cos, list(uses_cos.args)))

    monkeypatch.setattr(driver, "backend_for", lambda config: dataclasses.replace(cpu, emit_entry=entry_and_a_function_calling_cos))
    with pytest.raises(RuntimeError, match="references symbols it does not define: cos$"):
        compile_program(load_program(Fixture("mlp_softmax").module_text), target_config(DEFAULT), cache_dir=False)
