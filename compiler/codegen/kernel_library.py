"""Kernel libraries: shape-generic functions compiled once per target and shared by every
program, the way XLA:CPU calls a precompiled runtime for its matrix products.

A gemm's loops are the same for every shape; compiled once per dot and convolution shape, they
were most of a cold compile's LLVM time (BERT: seven gemm kernels of about 0.1 s each, of 0.85
s). A library is a module of exported functions that take the shape as arguments (dot_conv.py
builds the gemm library, one per accumulation type). A program's kernels call them
(`KernelModule.use_library`), and the library's object joins the program's objects
(objfile.pack_objects), so binary_hash covers the bytes that run as it covers every part's.

A library is found by its key (`LibraryUse.made`): the SHA-256 of what decides its object (the
library format and name, the configuration and machine, LLVM's version and pipeline, the
compiler's source), so finding it costs no IR. It is compiled once per process (`compiled`,
`remember`) and, where the compile has a cache (compiler/cache.py), stored there for every
later process. What the store returns is not trusted as read: its seal catches bit rot, and an
object that is not the one LLVM makes of the IR makes a binary_hash no honest compile makes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from compiler.codegen.llvm_machine import pipeline_identity
from compiler.codegen.target import machine_of
from compiler.config import CompilerConfig
from compiler.fingerprint import compiler_fingerprint

LIBRARY_FORMAT = 1


@dataclass(frozen=True)
class Library:
    """One library for one target: its name (`gemm.f32`), its content address and how to
    make its IR (only when it is compiled)."""

    name: str
    key: str
    make_ir: Callable[[], str]

    def ir_text(self) -> str:
        return self.make_ir()


@dataclass(frozen=True)
class LibraryUse:
    """A library a module's kernels call: its name, and how to make its IR. The lowering only
    records it (a graph's picture lowers without LLVM); the machine code makes it."""

    name: str
    make_ir: Callable[[], str]

    def made(self, config: CompilerConfig) -> Library:
        """The library for `config`'s target. Its key covers everything that decides its
        object: the library format, the name, the whole configuration, the machine LLVM is
        told of, LLVM's version and pipeline settings, and the compiler's own source (the IR
        is a function of those), so a process that finds the object stored never makes the
        IR."""
        material = {
            "format": LIBRARY_FORMAT,
            "name": self.name,
            "config": config.as_dict(),
            "machine": dataclasses.asdict(machine_of(config)),
            "pipeline": pipeline_identity(),
            "compiler": compiler_fingerprint(),
        }
        key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
        return Library(self.name, key, self.make_ir)


class LibraryStore(Protocol):
    """Where compiled libraries outlive the process (compiler/cache.py's CompileCache)."""

    def get_library(self, key: str) -> bytes | None: ...
    def put_library(self, key: str, object_bytes: bytes) -> None: ...


# The libraries this process has compiled or read, by key.
_COMPILED: dict[str, bytes] = {}


def compiled(library: Library, store: LibraryStore | None) -> bytes | None:
    """The library's object, if this process or the store has it."""
    found = _COMPILED.get(library.key)
    if found is None and store is not None:
        found = store.get_library(library.key)
        if found is not None:
            _COMPILED[library.key] = found
    return found


def remember(library: Library, object_bytes: bytes, store: LibraryStore | None) -> None:
    """Keeps a library's object for this process and the store."""
    _COMPILED[library.key] = object_bytes
    if store is not None:
        # A store that cannot be written costs a later process a compile, never this one.
        with contextlib.suppress(OSError):
            store.put_library(library.key, object_bytes)
