"""HLO shapes: arrays with an element type, dimensions and a layout, and tuples of shapes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.dtypes import DType


@dataclass(frozen=True)
class ArrayShape:
    """A dense array shape.

    `minor_to_major` is the layout: the dimension numbers from fastest to slowest varying in
    memory. The default layout is row-major, `(rank-1, ..., 1, 0)`.
    """

    dtype: DType
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...]

    @staticmethod
    def of(dtype: DType, dims: tuple[int, ...] | list[int]) -> ArrayShape:
        """An array shape with the default (row-major) layout."""
        dims = tuple(int(d) for d in dims)
        return ArrayShape(dtype, dims, default_layout(len(dims)))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_count(self) -> int:
        return math.prod(self.dims)

    @property
    def byte_size(self) -> int:
        return self.element_count * self.dtype.itemsize

    @property
    def has_default_layout(self) -> bool:
        return self.minor_to_major == default_layout(self.rank)

    def with_dtype(self, dtype: DType) -> ArrayShape:
        return ArrayShape(dtype, self.dims, self.minor_to_major)

    def with_default_layout(self) -> ArrayShape:
        return ArrayShape(self.dtype, self.dims, default_layout(self.rank))

    def same_logical(self, other: Shape) -> bool:
        """Equal element type and dimensions; layouts may differ."""
        return isinstance(other, ArrayShape) and self.dtype == other.dtype and self.dims == other.dims

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.dims)
        layout = ",".join(str(d) for d in self.minor_to_major)
        return f"{self.dtype.name}[{dims}]{{{layout}}}"

    def str_without_layout(self) -> str:
        return f"{self.dtype.name}[{','.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class TupleShape:
    """A tuple of shapes (possibly nested, possibly empty)."""

    elements: tuple[Shape, ...]

    def same_logical(self, other: Shape) -> bool:
        return (
            isinstance(other, TupleShape)
            and len(self.elements) == len(other.elements)
            and all(a.same_logical(b) for a, b in zip(self.elements, other.elements, strict=True))
        )

    def with_default_layout(self) -> TupleShape:
        return TupleShape(tuple(e.with_default_layout() for e in self.elements))

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"

    def str_without_layout(self) -> str:
        return "(" + ", ".join(e.str_without_layout() for e in self.elements) + ")"


Shape = ArrayShape | TupleShape


def default_layout(rank: int) -> tuple[int, ...]:
    """The row-major layout of a rank-`rank` array, minor to major."""
    return tuple(range(rank - 1, -1, -1))


def flatten(shape: Shape) -> list[ArrayShape]:
    """The array shapes of a (nested) tuple shape, depth first, left to right."""
    if isinstance(shape, ArrayShape):
        return [shape]
    out: list[ArrayShape] = []
    for element in shape.elements:
        out.extend(flatten(element))
    return out


def tuple_depth(shape: Shape) -> int:
    """Nesting depth of tuples: 0 for an array."""
    if isinstance(shape, ArrayShape):
        return 0
    return 1 + max((tuple_depth(e) for e in shape.elements), default=0)
