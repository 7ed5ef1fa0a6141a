"""How an exported function pins the contract's floating-point environment, by the target
row's `fp_environment` capability (compiler/targets.py): round to nearest, no flush of
subnormals, no traps, on every target, whatever the caller had set; the caller's environment
is restored afterwards.

- "mxcsr" (x86): MXCSR with every exception masked, round to nearest, FTZ and DAZ off.
- "fpcr" (AArch64): FPCR with round to nearest (RMode 0), FZ and FZ16 off, no exception
  traps, AH and FIZ off, and DN on: every NaN an arithmetic instruction makes is the default
  NaN, which is the contract's canonical NaN (f32 0x7FC00000, f64 0x7FF8000000000000).
- "none": the instructions themselves carry the rounding and subnormal behaviour (NVPTX's
  `.rn` without `.ftz`); nothing to set.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from compiler.codegen.llvm_ir import I32, I64, PTR, VOID, declare_intrinsic

CONTRACT_MXCSR = 0x1F80
CONTRACT_FPCR = 1 << 25

# Given the module and a builder before the body's call, sets the contract's environment
# and returns what restores the caller's, to be called after the body.
Pin = Callable[[ir.Module, ir.IRBuilder], Callable[[ir.IRBuilder], None]]


def _mxcsr(module: ir.Module, builder: ir.IRBuilder) -> Callable[[ir.IRBuilder], None]:
    saved = builder.alloca(I32, name="saved_mxcsr")
    wanted = builder.alloca(I32, name="contract_mxcsr")
    stmxcsr = declare_intrinsic(module, "llvm.x86.sse.stmxcsr", VOID, [PTR])
    ldmxcsr = declare_intrinsic(module, "llvm.x86.sse.ldmxcsr", VOID, [PTR])
    builder.call(stmxcsr, [saved])
    builder.store(I32(CONTRACT_MXCSR), wanted)
    builder.call(ldmxcsr, [wanted])

    def restore(after: ir.IRBuilder) -> None:
        after.call(ldmxcsr, [saved])

    return restore


def _fpcr(module: ir.Module, builder: ir.IRBuilder) -> Callable[[ir.IRBuilder], None]:
    get_fpcr = declare_intrinsic(module, "llvm.aarch64.get.fpcr", I64, [])
    set_fpcr = declare_intrinsic(module, "llvm.aarch64.set.fpcr", VOID, [I64])
    saved = builder.call(get_fpcr, [], name="saved_fpcr")
    builder.call(set_fpcr, [I64(CONTRACT_FPCR)])

    def restore(after: ir.IRBuilder) -> None:
        after.call(set_fpcr, [saved])

    return restore


def _none(module: ir.Module, builder: ir.IRBuilder) -> Callable[[ir.IRBuilder], None]:
    def restore(after: ir.IRBuilder) -> None:
        pass

    return restore


PINS: dict[str, Pin] = {"mxcsr": _mxcsr, "fpcr": _fpcr, "none": _none}
