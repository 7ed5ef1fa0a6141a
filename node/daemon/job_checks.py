"""The checks a job must pass before it is stored or run: module size, parse and work
estimate, each input's size and decoding, and the inputs against the module's parameters.

The HTTP API, the worker pool and the execution process call the same functions, so a job
the API accepted is never refused later for a different reason. The daemon never parses a
module itself: a checker process does (`check_module` there), and the daemon keeps the
`ModuleSummary` it answers, which is all it needs of the module to check inputs and store
the job.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from attest import TensorRecord
from attest.digests import sha256_hex
from compiler.api import (
    ArgumentError,
    ArrayShape,
    HloError,
    Program,
    Shape,
    bind_arguments,
    estimate_flops,
    load_program,
    parse_shape,
)
from core.lru import Lru
from node.daemon.config import Limits
from node.errors import JobRejected
from node.tensors import read_npy
from node.tracing.statement import tensor_records

T = TypeVar("T")


def decode_npy(data: bytes, what: str, shape: Shape | None = None) -> np.ndarray:
    """The array in .npy bytes (never unpickles); JobRejected naming `what` otherwise. With
    the parameter `shape` it should fill, the common exact form is read without parsing its
    header (any other .npy is read as well, and checked against the shape later)."""
    expected = (shape.dtype.numpy, shape.dims) if isinstance(shape, ArrayShape) else (None, None)
    try:
        return read_npy(data, *expected)
    except ValueError as error:
        raise JobRejected(f"{what}: {error}") from None


def check_module_size(module_bytes: bytes, limits: Limits) -> None:
    """JobRejected (413) for a module over limits.max_module_bytes: checked where the bytes
    are, before they go anywhere to be parsed."""
    if len(module_bytes) > limits.max_module_bytes:
        raise JobRejected(
            f"module: {len(module_bytes)} bytes, over limits.max_module_bytes ({limits.max_module_bytes})",
            413,
        )


def check_module(module_bytes: bytes, limits: Limits, known: KnownModules[tuple[Program, int]] | None = None) -> Program:
    """The parsed, verified module; JobRejected (400 with line:col, 413, 422) otherwise.
    With `known`, a module whose bytes passed before is not parsed again. Runs where the
    module may be parsed: an execution or checker process, never the daemon."""
    return checked_module(module_bytes, limits, known)[0]


def checked_module(module_bytes: bytes, limits: Limits, known: KnownModules[tuple[Program, int]] | None = None) -> tuple[Program, int]:
    """`check_module`'s program and its work estimate."""
    check_module_size(module_bytes, limits)
    remembered = known.recall(module_bytes) if known is not None else None
    if remembered is None:
        try:
            program = load_program(module_bytes)
        except HloError as error:
            raise JobRejected(f"module: {error}") from None
        remembered = program, estimate_flops(program.module)
        if known is not None:
            known.remember(module_bytes, remembered)
    check_flops(remembered[1], limits)
    return remembered


def check_flops(flops: int, limits: Limits) -> None:
    if flops > limits.max_flops:
        raise JobRejected(f"module: estimated {flops} operations, over limits.max_flops ({limits.max_flops})", 422)


@dataclass(frozen=True)
class ModuleSummary:
    """What the daemon keeps of a module a checker process parsed: its identity, its
    parameters and its work estimate."""

    source_hash: str
    hlo_hash: str
    parameter_shapes: tuple[Shape, ...]
    flops: int
    parameter_names: tuple[str, ...] = ()  # as the user knows them (Program.parameter_names)

    @staticmethod
    def of(program: Program, flops: int) -> ModuleSummary:
        return ModuleSummary(program.source_hash, program.hlo_hash, tuple(program.parameter_shapes), flops, tuple(program.parameter_names))

    def to_json(self) -> dict:
        return {"source_hash": self.source_hash, "hlo_hash": self.hlo_hash, "parameters": [str(s) for s in self.parameter_shapes],
                "parameter_names": list(self.parameter_names), "flops": self.flops}  # fmt: skip

    @staticmethod
    def from_json(data: dict) -> ModuleSummary:
        shapes = tuple(parse_shape(text) for text in data["parameters"])
        names = tuple(str(name) for name in data.get("parameter_names", ()))
        return ModuleSummary(str(data["source_hash"]), str(data["hlo_hash"]), shapes, int(data["flops"]), names)


class KnownModules(Generic[T]):
    """What was found of the modules checked last (a process's parsed programs, the daemon's
    summaries), by the SHA-256 of their bytes: a node sees the same module in every job of a
    model, and checking equal bytes gives the same answer (nothing changes a program: the
    compiler optimizes a copy). Bounded in entries and in source bytes (a parsed module takes
    up to about 16 times its text: 8 MiB of text is some 130 MB held); safe to share between
    threads."""

    def __init__(self, entries: int = 32, source_bytes: int = 8 << 20) -> None:
        self._found: Lru[str, tuple[T, int]] = Lru(entries, source_bytes, size=lambda found: found[1])
        self._lock = threading.Lock()

    def recall(self, module_bytes: bytes) -> T | None:
        key = sha256_hex(module_bytes)
        with self._lock:
            found = self._found.get(key)
        return None if found is None else found[0]

    def remember(self, module_bytes: bytes, found: T) -> None:
        with self._lock:
            self._found.put(sha256_hex(module_bytes), (found, len(module_bytes)))


def prepare_job(
    module_bytes: bytes, input_bytes: Sequence[bytes], limits: Limits, known: KnownModules | None = None
) -> tuple[Program, list[np.ndarray]]:
    """Everything checked before a job is stored or run: the module (`check_module`), then
    its inputs (`check_inputs`). Raises JobRejected naming the problem."""
    program = check_module(module_bytes, limits, known)
    return program, check_inputs(program.parameter_shapes, input_bytes, limits)


def check_inputs(parameters: Sequence[Shape], input_bytes: Sequence[bytes], limits: Limits) -> list[np.ndarray]:
    """Each input's size and decoding, and the inputs' count, dtypes and shapes against a
    checked module's parameters; the arrays, or JobRejected naming the problem."""
    arrays = []
    for index, data in enumerate(input_bytes):
        if len(data) > limits.max_tensor_bytes:
            raise JobRejected(
                f"input {index}: {len(data)} bytes, over limits.max_tensor_bytes ({limits.max_tensor_bytes})",
                413,
            )
        arrays.append(decode_npy(data, f"input {index}", parameters[index] if index < len(parameters) else None))
    try:
        return bind_arguments(parameters, arrays)
    except ArgumentError as error:
        raise JobRejected(str(error)) from None


class InputRecords:
    """The tensor records (element type, dimensions, digest) of the inputs the daemon has
    checked, by each input blob's digest and the parameter it binds to: what the execution
    process's statement must record of them. A node sees the same weights in every job of a
    model; their tensor digest, the costly part, depends only on those bytes and that
    parameter, so it is computed once per blob, not once per job. Bounded in entries; safe to
    share between threads."""

    def __init__(self, entries: int = 4096) -> None:
        self._found: Lru[tuple[str, str], tuple[str, tuple[int, ...], str]] = Lru(entries)
        self._lock = threading.Lock()

    def of(
        self, parameters: Sequence[Shape], input_digests: Sequence[str], input_bytes: Sequence[bytes], limits: Limits
    ) -> tuple[TensorRecord, ...]:
        """The records `in0`, `in1`, ... of the inputs; each one not seen before is checked
        against its parameter (`check_inputs`: JobRejected naming the problem) and digested."""
        keys = [(digest, str(shape)) for digest, shape in zip(input_digests, parameters, strict=False)]
        with self._lock:
            found = [self._found.get(key) for key in keys]
        if len(keys) != len(input_bytes) or len(parameters) != len(input_bytes) or None in found:
            # Every input is checked (decoding is cheap); only those not seen before are
            # digested: a job's new inputs beside a model's known weights.
            arrays = check_inputs(parameters, input_bytes, limits)
            found = [
                known or next((r.dtype, r.shape, r.digest) for r in tensor_records([array], "in"))
                for known, array in zip(found, arrays, strict=True)
            ]
            with self._lock:
                for key, record in zip(keys, found, strict=True):
                    self._found.put(key, record)
        return tuple(TensorRecord(f"in{i}", *record) for i, record in enumerate(found))
