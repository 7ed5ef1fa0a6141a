"""Loads object-file bytes into an execution engine: the bytes that were hashed are the bytes
that run (there is no second compilation from IR)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from compiler.codegen.objfile import unpack_objects
from compiler.codegen.target import target_machine
from compiler.config import CompilerConfig
from compiler.errors import BackendError
from compiler.host import this_host


class LoadError(BackendError):
    """Object bytes that cannot be loaded or lack an expected function."""


@dataclass
class LoadedObject:
    """An object file mapped into this process; keeps the engine alive."""

    engine: llvm.ExecutionEngine
    _functions: dict[str, int] = field(default_factory=dict)

    def address(self, name: str) -> int:
        if name not in self._functions:
            address = self.engine.get_function_address(name)
            if not address:
                raise LoadError(f"object has no function {name!r}")
            self._functions[name] = address
        return self._functions[name]

    def function(self, name: str, restype, *argtypes):
        """A ctypes callable for `name` (ctypes releases the GIL during the call)."""
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.address(name))


def load_object(object_bytes: bytes, config: CompilerConfig) -> LoadedObject:
    """Maps exactly `object_bytes` (one object, or the parts' objects: codegen/objfile.py
    `pack_objects`) into an MCJIT engine built over an empty module, after
    checking that this host has every feature `config`'s code may use (TargetNotRunnable
    otherwise: nothing is mapped, so nothing can die of an illegal instruction)."""
    this_host().check(config)
    machine = target_machine(config)
    try:
        objects = unpack_objects(object_bytes)
    except ValueError as exc:
        raise LoadError(f"damaged machine code: {exc}") from None
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    for data in objects:  # calls from one object into another resolve when they are mapped
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
    engine.finalize_object()
    return LoadedObject(engine)
