"""The checks a job must pass before it is stored or run: module size, parse and work
estimate, each input's size and decoding, and the inputs against the module's parameters.

The HTTP API, the worker pool and the execution process call the same functions, so a job
the API accepted is never refused later for a different reason.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from attest.digests import sha256_hex
from compiler.hlo import HloError
from compiler.hlo.cost import estimate_flops
from compiler.hlo.shape import ArrayShape, Shape
from compiler.program import Program, load_program
from node.daemon.config import Limits
from node.errors import JobRejected
from node.tensors import read_npy
from node.tracing.statement import TraceInputError, checked_inputs


def decode_npy(data: bytes, what: str, shape: Shape | None = None) -> np.ndarray:
    """The array in .npy bytes (never unpickles); JobRejected naming `what` otherwise. With
    the parameter `shape` it should fill, the common exact form is read without parsing its
    header (any other .npy is read as well, and checked against the shape later)."""
    expected = (shape.dtype.numpy, shape.dims) if isinstance(shape, ArrayShape) else (None, None)
    try:
        return read_npy(data, *expected)
    except ValueError as error:
        raise JobRejected(f"{what}: {error}") from None


def check_module(module_bytes: bytes, limits: Limits, known: KnownModules | None = None) -> Program:
    """The parsed, verified module; JobRejected (400 with line:col, 413, 422) otherwise.
    With `known`, a module whose bytes passed before is not parsed again."""
    if len(module_bytes) > limits.max_module_bytes:
        raise JobRejected(
            f"module: {len(module_bytes)} bytes, over limits.max_module_bytes ({limits.max_module_bytes})",
            413,
        )
    remembered = known.recall(module_bytes) if known is not None else None
    if remembered is None:
        try:
            program = load_program(module_bytes)
        except HloError as error:
            raise JobRejected(f"module: {error}") from None
        remembered = program, estimate_flops(program.module)
        if known is not None:
            known.remember(*remembered)
    program, flops = remembered
    if flops > limits.max_flops:
        raise JobRejected(f"module: estimated {flops} operations, over limits.max_flops ({limits.max_flops})", 422)
    return program


class KnownModules:
    """The programs of the modules parsed last, by the SHA-256 of their bytes, with their
    work estimates: a node sees the same module in every job of a model, and parsing equal
    bytes gives the same program (which nothing changes: the compiler optimizes a copy).
    Bounded in entries and in source bytes (a parsed module takes up to about 16 times its
    text: 8 MiB of text is some 130 MB held); safe to share between threads."""

    def __init__(self, entries: int = 32, source_bytes: int = 8 << 20) -> None:
        self.entries = entries
        self.source_bytes = source_bytes
        self._programs: OrderedDict[str, tuple[Program, int]] = OrderedDict()
        self._lock = threading.Lock()

    def recall(self, module_bytes: bytes) -> tuple[Program, int] | None:
        key = sha256_hex(module_bytes)
        with self._lock:
            found = self._programs.get(key)
            if found is not None:
                self._programs.move_to_end(key)
            return found

    def remember(self, program: Program, flops: int) -> None:
        if len(program.source) > self.source_bytes:
            return
        with self._lock:
            self._programs[program.source_hash] = (program, flops)
            while len(self._programs) > self.entries or self._held_bytes() > self.source_bytes:
                self._programs.popitem(last=False)

    def _held_bytes(self) -> int:
        return sum(len(program.source) for program, _ in self._programs.values())


def prepare_job(
    module_bytes: bytes, input_bytes: Sequence[bytes], limits: Limits, known: KnownModules | None = None
) -> tuple[Program, list[np.ndarray]]:
    """Everything checked before a job is stored or run: the module (`check_module`), then
    its inputs (`check_inputs`). Raises JobRejected naming the problem."""
    program = check_module(module_bytes, limits, known)
    return program, check_inputs(program, input_bytes, limits)


def check_inputs(program: Program, input_bytes: Sequence[bytes], limits: Limits) -> list[np.ndarray]:
    """Each input's size and decoding, and the inputs' count, dtypes and shapes against the
    checked `program`'s parameters; the arrays, or JobRejected naming the problem."""
    parameters = program.parameter_shapes
    arrays = []
    for index, data in enumerate(input_bytes):
        if len(data) > limits.max_tensor_bytes:
            raise JobRejected(
                f"input {index}: {len(data)} bytes, over limits.max_tensor_bytes ({limits.max_tensor_bytes})",
                413,
            )
        arrays.append(decode_npy(data, f"input {index}", parameters[index] if index < len(parameters) else None))
    try:
        return checked_inputs(program, arrays)
    except TraceInputError as error:
        raise JobRejected(str(error)) from None
