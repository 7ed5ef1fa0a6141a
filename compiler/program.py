"""A submitted program: the bytes the user gave, the verified module, and its two hashes.

source_hash is the SHA-256 of the submitted bytes (what was sent); hlo_hash is the SHA-256 of
the canonical text (what it means: formatting, names and metadata do not change it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from attest.digests import sha256_hex, text_digest
from compiler.errors import ArgumentError
from compiler.hlo import HloParseError, canonical_text, load_module
from compiler.hlo.errors import SourceLocation
from compiler.hlo.ir import Module
from compiler.hlo.shape import ArrayShape, Shape


@dataclass
class Program:
    """A verified HLO module with the identity of its source. The module is parsed when first
    asked for: a program recalled from the compile cache (`recalled`) may never need it."""

    source: bytes
    _module: Module | None = field(default=None, repr=False)
    _hlo_hash: str | None = field(default=None, repr=False)

    @staticmethod
    def recalled(source: bytes, hlo_hash: str) -> Program:
        """A program whose exact bytes this compiler parsed and verified before, with the
        hlo_hash it found (the compile cache's source index): nothing is parsed now, and the
        module, when asked for, parses as it did then."""
        return Program(source, None, hlo_hash)

    @property
    def module(self) -> Module:
        if self._module is None:
            self._module = load_module(self.source.decode("utf-8"))
        return self._module

    @cached_property
    def source_hash(self) -> str:
        return sha256_hex(self.source)

    @cached_property
    def canonical_text(self) -> str:
        return canonical_text(self.module)

    @property
    def hlo_hash(self) -> str:
        if self._hlo_hash is None:
            self._hlo_hash = text_digest(self.canonical_text)
        return self._hlo_hash

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.module.entry.parameters]

    @property
    def parameter_names(self) -> list[str]:
        """Each parameter as the user knows it: JAX's op_name for it where the HLO's metadata
        has one (the argument's pytree path, `params['w']`), else its name in the module (for
        messages and listings; nothing hashed)."""
        return [p.location.user if p.location is not None and p.location.user else p.name for p in self.module.entry.parameters]

    @property
    def result_shape(self) -> Shape:
        return self.module.entry.root.shape

    def bind(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The arguments of a run, checked against the entry parameters (see
        `bind_arguments`)."""
        return bind_arguments(self.parameter_shapes, arrays)

    def opcode_counts(self) -> dict[str, int]:
        """Instructions per opcode over the computations reachable from the entry, sorted by
        opcode."""
        counts: Counter[str] = Counter()
        for computation in self.module.reachable_computations():
            counts.update(i.opcode for i in computation.post_order())
        return dict(sorted(counts.items()))


def load_program(source: bytes | str) -> Program:
    """Decodes, parses and verifies HLO text; raises HloError naming line and column."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise HloParseError("the module is not UTF-8 text", SourceLocation(line, column)) from None
    return Program(data, load_module(text))


def bind_arguments(parameters: Sequence[Shape], arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One array per entry parameter, each of exactly its element type and dimensions, C
    contiguous; ArgumentError naming the first that is not."""
    if len(arrays) != len(parameters):
        raise ArgumentError(f"module takes {len(parameters)} inputs, got {len(arrays)}")
    return [bind_argument(shape, array, index) for index, (shape, array) in enumerate(zip(parameters, arrays, strict=True))]


def bind_argument(shape: Shape, array: np.ndarray, position: int) -> np.ndarray:
    """Validates one entry argument against its parameter's shape; returns it as the exact
    element type (bfloat16 and the 8-bit floats arrive from .npy files as raw records, which
    are read as their bits)."""
    if not isinstance(shape, ArrayShape):
        raise ArgumentError(f"parameter {position} has tuple shape {shape}; pass its elements as a tuple")
    array = np.asarray(array)
    expected = shape.dtype.numpy
    if shape.dtype.is_sub_byte:
        return _bind_sub_byte(shape, array, position)
    if array.dtype == expected and array.shape == shape.dims and array.flags.c_contiguous:
        return array  # the common case, checked without building any message
    if array.dtype != expected:
        raw_bits = (shape.dtype.name == "bf16" or shape.dtype.is_float8) and array.dtype.itemsize == shape.dtype.itemsize and array.dtype.kind in "Vu"
        if not raw_bits:
            raise ArgumentError(_mismatch(shape, array, position))
        array = np.require(array, requirements="C").view(expected)
    if tuple(array.shape) != shape.dims:
        raise ArgumentError(_mismatch(shape, array, position))
    return np.require(array, requirements="C")


def _bind_sub_byte(shape: ArrayShape, array: np.ndarray, position: int) -> np.ndarray:
    """An s4 or u4 argument: int8 or uint8 holding the values (or ml_dtypes' int4 and uint4,
    what JAX hands out), every value in the type's range."""
    if array.dtype.name == f"{'int' if shape.dtype.is_signed else 'uint'}{shape.dtype.bits}":
        array = array.astype(shape.dtype.numpy)
    if array.dtype != shape.dtype.numpy or tuple(array.shape) != shape.dims:
        raise ArgumentError(_mismatch(shape, array, position) + f" ({shape.dtype.name} values are passed as {shape.dtype.numpy})")
    least, greatest = shape.dtype.integer_bounds
    outside = (array < least) | (array > greatest)
    if outside.any():
        first = tuple(int(i) for i in np.argwhere(outside)[0])
        raise ArgumentError(
            f"parameter {position} is {shape.str_without_layout()}, but its element {list(first)} is "
            f"{int(array[first])}, outside [{least}, {greatest}]"
        )
    return np.require(array, requirements="C")


def _mismatch(shape: ArrayShape, array: np.ndarray, position: int) -> str:
    got = f"{array.dtype}[{','.join(str(d) for d in array.shape)}]"
    return f"parameter {position} expects {shape.str_without_layout()}, got an array of {got}"
