"""The seam between target-free and target-specific code generation.

Everything up to the kernels is the same for every target: the passes, the lowering of each
op family into kernels `void kernel(ptr slots, i64 begin, i64 end)` over work items, the
plan, the buffer assignment. A backend adds what runs the kernels and makes the bytes that
are hashed and run:
- `CPU` here, for the targets whose code runs on the host: the native entry that runs the
  plan's steps on worker threads (native_plan.py), compiled to ELF objects (one per part of
  the module, partition.py, made at once by llvm_workers.py) that reference no symbol but
  each other's and the kernel libraries' (kernel_library.py);
- a device's backend, in that target's own module: a grid entry per kernel (grid.py) and
  its code-object linker (nvptx.py: PTX that must pass the contract's checks, linked to a
  cubin).
backends.py names each by the target row's `backend` capability (compiler/targets.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from compiler.codegen import kernel_library, native_plan, partition
from compiler.codegen.kernel import KernelModule
from compiler.codegen.llvm_workers import Compilation
from compiler.codegen.objfile import pack_objects, unresolved_symbols
from compiler.codegen.plan import Plan
from compiler.config import CompilerConfig
from compiler.errors import BackendError


class MachineCode(Protocol):
    """The bytes of one compile, made while the lowering runs: `attach` is given the module
    before its first kernel; `finish`, once the entry is in it, returns the bytes to hash
    and run; `abandon` drops the work of a compile that failed."""

    def attach(self, kernels: KernelModule) -> None: ...
    def finish(self) -> bytes: ...
    def abandon(self) -> None: ...


@dataclass(frozen=True)
class Backend:
    """How a target's plan runs and what its bytes are."""

    name: str
    # Adds to the module what runs the plan's kernels (it may reserve arena space in the plan).
    emit_entry: Callable[[KernelModule, Plan], None]
    # What makes the bytes of one compile for a config (and where kernel libraries are kept).
    machine_code: Callable[[CompilerConfig, kernel_library.LibraryStore | None], MachineCode]
    # The symbols those bytes reference and nothing defines (every binary's must be none).
    unresolved_symbols: Callable[[bytes], list[str]]
    # Whether a large module is compiled in parts by LLVM worker processes (llvm_workers.py),
    # which a compile may start before the parts are ready.
    compiles_in_parts: bool = False
    # Whether its entry can take the test-only schedule perturbation (worker threads to upset).
    schedule_perturbation: bool = False

    def emit_binary(self, kernels: KernelModule, config: CompilerConfig) -> bytes:
        """The bytes of a finished module (its entry in it)."""
        code = self.machine_code(config, None)
        code.attach(kernels)
        if kernels.on_library is not None:  # told of the libraries and units used before it came
            for library in kernels.libraries:
                kernels.on_library(library)
        if kernels.on_unit is not None:
            for name in kernels.units:
                kernels.on_unit(name)
        return code.finish()


class CpuObjects:
    """A CPU target's objects: every part (partition.Parts) compiled as soon as it is full,
    by LLVM worker processes while the lowering goes on (llvm_workers.Compilation); one
    object for a program of one part, else `pack_objects` of them in order, after the
    objects of the kernel libraries the kernels call (kernel_library.py), in the order of
    first use. A library this process has not compiled and `store` does not hold is compiled
    with the parts (handed over with the first full part, or with a one-part program's only
    part, in this process), then kept."""

    def __init__(self, config: CompilerConfig, store: kernel_library.LibraryStore | None = None) -> None:
        self.config = config
        self.store = store
        self.compilation: Compilation | None = None
        self.parts: partition.Parts | None = None
        self._submitted = 0
        self._part_indices: list[int] = []  # each part's index among the submitted texts
        self._libraries: list[kernel_library.Library] = []  # in the order of first use
        self._library_indices: dict[str, int] = {}  # by key: the libraries submitted to LLVM
        self._unsubmitted: list[kernel_library.Library] = []

    def attach(self, kernels: KernelModule) -> None:
        self.parts = partition.Parts(kernels, self._full)
        kernels.on_unit = self.parts.unit_finished
        kernels.on_library = self._library

    def _library(self, use: kernel_library.LibraryUse) -> None:
        library = use.made(self.config)
        self._libraries.append(library)
        if kernel_library.compiled(library, self.store) is None:
            self._unsubmitted.append(library)
            if self.compilation is not None:
                self._submit_libraries()

    def _submit_libraries(self) -> None:
        for library in self._unsubmitted:
            self._library_indices[library.key] = self._submit(library.ir_text())
        self._unsubmitted = []

    def _full(self, text: str) -> None:
        self._part_indices.append(self._submit(text))
        self._submit_libraries()

    def _submit(self, text: str) -> int:
        if self.compilation is None:
            self.compilation = Compilation(self.config)
        self.compilation.submit(text)
        self._submitted += 1
        return self._submitted - 1

    def finish(self) -> bytes:
        assert self.parts is not None
        remaining = self.parts.finish()
        if self.compilation is None and len(remaining) == 1:
            # The whole program is one part: compiled here, with no worker process to start.
            self.compilation = Compilation(self.config, helpers=0)
        for text in remaining:
            self._full(text)
        assert self.compilation is not None
        compiled = self.compilation.finish()
        objects = []
        for library in self._libraries:
            index = self._library_indices.get(library.key)
            if index is not None:
                kernel_library.remember(library, compiled[index], self.store)
            found = kernel_library.compiled(library, self.store)
            assert found is not None  # compiled here, or found by _library and kept
            objects.append(found)
        object_bytes = pack_objects(objects + [compiled[index] for index in self._part_indices])
        missing = CPU.unresolved_symbols(object_bytes)
        if missing:
            raise BackendError(f"compiled object references symbols it does not define: {', '.join(missing)}")
        return object_bytes

    def abandon(self) -> None:
        if self.compilation is not None:
            self.compilation.abandon()


@dataclass
class WholeModule:
    """The bytes `emit` makes of the whole module's IR text, once it is finished."""

    config: CompilerConfig
    emit: Callable[[str, CompilerConfig], bytes]
    kernels: KernelModule | None = None

    def attach(self, kernels: KernelModule) -> None:
        self.kernels = kernels

    def finish(self) -> bytes:
        assert self.kernels is not None
        return self.emit(self.kernels.ir_text(), self.config)

    def abandon(self) -> None:
        pass


CPU = Backend("cpu", native_plan.emit_entry, CpuObjects, unresolved_symbols, compiles_in_parts=True, schedule_perturbation=True)
