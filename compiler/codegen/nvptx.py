"""NVIDIA GPUs through LLVM's NVPTX target: grid entries as PTX kernels, the checks every PTX
text passes, and the cubin nvJitLink makes of it.

What the hardware needs to be told, and what it does not:
- LLVM writes every IR `fadd`/`fmul`/`fdiv`/`sqrt`/`fma` with an explicit rounding mode
  (`add.rn`, `mul.rn`, `div.rn`, `sqrt.rn`, `fma.rn`): ptxas never contracts an instruction
  that names its rounding, and never flushes subnormals unless `.ftz` is written. `check_ptx`
  refuses any PTX with `.ftz`, `.approx`, a floating-point atomic, a float add or multiply
  without its rounding mode, or an external symbol.
- The GPU's arithmetic NaN is 0x7fffffff, not the contract's; the element emitters already
  canonicalize every NaN an op can make (numerics_ir.canonicalize_nan), as x86 needs too.
- The bytes that run are the bytes hashed: the cubin for exactly one architecture, made by the
  pinned nvJitLink (config.NVJITLINK_VERSION) on any machine, GPU or not, and loaded as it is
  (compiler/runtime/cuda_device.py), never the driver's PTX JIT.
"""

from __future__ import annotations

import re

from llvmlite import ir

from compiler.codegen.backend import Backend, WholeModule
from compiler.codegen.grid import GRID_ENTRY_TYPE, GridTarget, emit_grid
from compiler.codegen.kernel import KernelModule
from compiler.codegen.llvm_ir import I32, declare_intrinsic
from compiler.codegen.objfile import undefined_symbols
from compiler.codegen.target import assembly
from compiler.config import CompilerConfig
from compiler.errors import BackendError, ConfigError
from compiler.targets import NVJITLINK_VERSION


class NvptxGrid(GridTarget):
    """Grid entries that read the block index, block size and thread index from NVIDIA's
    special registers and are marked as kernels (launchable from the host)."""

    def define_entry(self, kernels: KernelModule, symbol: str, body: ir.Function) -> None:
        module = kernels.module
        entry = ir.Function(module, GRID_ENTRY_TYPE, symbol)
        entry.attributes.add("nounwind")
        builder = ir.IRBuilder(entry.append_basic_block("entry"))
        slots, extent = entry.args

        def register(name: str) -> ir.Value:
            read = declare_intrinsic(module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
            return builder.zext(builder.call(read, []), body.args[1].type)

        builder.call(body, [slots, extent, register("ctaid.x"), register("ntid.x"), register("tid.x")])
        builder.ret_void()
        module.add_named_metadata("nvvm.annotations", [entry, ir.MetaDataString(module, "kernel"), I32(1)])


# What no PTX of this compiler may contain: each would let the hardware or ptxas decide bits
# the contract pins.
_FORBIDDEN = (
    (re.compile(r"\.ftz\b"), "flushes subnormals to zero (.ftz)"),
    (re.compile(r"\.approx\b"), "an approximate instruction (.approx)"),
    (re.compile(r"\b(?:atom|red)(?:\.[a-z]+)*\.(?:f16|bf16|f32|f64)\b"), "a floating-point atomic (its order of additions is the hardware's)"),
    (re.compile(r"^\s*(?:add|sub|mul)(?:\.sat)?\.f(?:32|64)\s", re.M), "a float add or multiply without a rounding mode (ptxas may contract it into an fma)"),
    (re.compile(r"^\s*\.extern\b", re.M), "an external symbol"),
)


def check_ptx(ptx: str) -> list[str]:
    """What is wrong with `ptx` (empty when nothing): every forbidden construct, with its
    first line."""
    problems = []
    for pattern, what in _FORBIDDEN:
        found = pattern.search(ptx)
        if found:
            line = ptx[ptx.rfind("\n", 0, found.start()) + 1 : ptx.find("\n", found.end())].strip()
            problems.append(f"{what}: `{line}`")
    return problems


def ptx_of(ir_text: str, config: CompilerConfig) -> str:
    """The PTX LLVM writes for the module (after the standard pipeline); RuntimeError when it
    fails `check_ptx`."""
    ptx = assembly(ir_text, config)
    problems = check_ptx(ptx)
    if problems:
        raise BackendError(f"PTX for {config.cpu} breaks the numerics contract: " + "; ".join(problems))
    return ptx


def cubin_of(ptx: str, config: CompilerConfig) -> bytes:
    """The cubin of `ptx` for the config's architecture, made by the pinned nvJitLink (no GPU
    or driver needed). ConfigError when nvJitLink is missing or another release."""
    nvjitlink = _nvjitlink()
    architecture = config.target_cpu.processor
    handle = nvjitlink.create(2, [f"-arch={architecture}", "-O3"])
    try:
        data = ptx.encode("ascii")
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "vxla.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                nvjitlink.get_error_log(handle, log)
            raise BackendError(f"nvJitLink refused the PTX for {architecture}: {exc}: {log.decode(errors='replace').strip()}") from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


# Symbols a cubin may leave undefined: the driver's own reserved shared-memory offsets
# (`.nv.reservedSmem.*`), which it fills in when it loads any sm_80+ cubin.
_DRIVER_RESERVED = ".nv.reserved"


def unresolved_symbols(cubin: bytes) -> list[str]:
    """Symbols the cubin references but neither defines nor leaves to the driver (must be
    empty: nothing from a library or the host), sorted."""
    return [name for name in undefined_symbols(cubin) if not name.startswith(_DRIVER_RESERVED)]


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        raise ConfigError(f"GPU targets need NVIDIA's nvJitLink {NVJITLINK_VERSION} and cuda-bindings: pip install 'vxla[gpu]'") from None
    try:
        version = ".".join(str(part) for part in nvjitlink.version())
    except Exception as exc:  # the library itself is missing or broken
        raise ConfigError(f"GPU targets need NVIDIA's nvJitLink {NVJITLINK_VERSION} (pip install 'vxla[gpu]'): {exc}") from None
    if version != NVJITLINK_VERSION:
        raise ConfigError(
            f"this compiler makes cubins with nvJitLink {NVJITLINK_VERSION}, and nvJitLink {version} is installed: "
            f"another release may emit other machine code (pip install 'nvidia-nvjitlink=={NVJITLINK_VERSION}.*')"
        )
    return nvjitlink


def _binary(ir_text: str, config: CompilerConfig) -> bytes:
    cubin = cubin_of(ptx_of(ir_text, config), config)
    missing = unresolved_symbols(cubin)
    if missing:
        raise BackendError(f"cubin references symbols it does not define: {', '.join(missing)}")
    return cubin


# The backend of the nvptx64 row: a grid entry per kernel, the module's PTX linked to a cubin.
BACKEND = Backend(
    "nvptx",
    lambda kernels, plan: emit_grid(kernels, plan, NvptxGrid()),
    lambda config, store: WholeModule(config, _binary),
    unresolved_symbols,
)
