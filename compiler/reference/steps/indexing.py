"""Index arithmetic as steps: coordinates are s64 steps, so that an element's program does
not depend on which element it is. Static parts (strides, offsets, window positions) are
constants, and the recorder folds arithmetic on constants."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.reference.scalar import Op
from core.dtypes import PRED, S64

from .record import Recorder

Coords = tuple[int, ...]  # one s64 step per dimension


def const(rec: Recorder, value: int) -> int:
    return rec.const(S64, value & ((1 << 64) - 1))


def add(rec: Recorder, a: int, value: int) -> int:
    """a + value (value static)."""
    return a if value == 0 else rec.op(Op.ADD, a, const(rec, value))


def scale(rec: Recorder, a: int, factor: int) -> int:
    return a if factor == 1 else rec.op(Op.MUL, a, const(rec, factor))


def strides(dims: Sequence[int]) -> list[int]:
    out, stride = [], 1
    for size in reversed(dims):
        out.append(stride)
        stride *= size
    return out[::-1]


def flat(rec: Recorder, coords: Coords, dims: Sequence[int]) -> int:
    """The row-major flat index of `coords` in an array of `dims`."""
    total = None
    for coord, stride in zip(coords, strides(dims), strict=True):
        term = scale(rec, coord, stride)
        total = term if total is None else rec.op(Op.ADD, total, term)
    return const(rec, 0) if total is None else total


def unflat(rec: Recorder, index: int, dims: Sequence[int]) -> Coords:
    """The row-major coordinates of flat `index` (0 <= index < prod(dims))."""
    coords = []
    for position, (size, stride) in enumerate(zip(dims, strides(dims), strict=True)):
        coord = index if stride == 1 else rec.op(Op.FLOOR_DIV, index, const(rec, stride))
        if position > 0:
            coord = rec.op(Op.REM, coord, const(rec, size))
        coords.append(coord)
    return tuple(coords)


def in_range(rec: Recorder, a: int, low: int, high: int) -> int:
    """The pred step low <= a < high."""
    return rec.op(Op.AND, rec.op(Op.GE, a, const(rec, low)), rec.op(Op.LT, a, const(rec, high)))


def all_of(rec: Recorder, preds: Sequence[int]) -> int:
    result = rec.const(PRED, 1)
    for p in preds:
        result = rec.op(Op.AND, result, p)
    return result


def select(rec: Recorder, p: int, a: int, b: int) -> int:
    """a where p else b; a constant-true or constant-false p chooses statically."""
    step = rec.steps[p]
    if step.kind.value == "const":
        return a if step.value else b
    return rec.op(Op.SELECT, p, a, b)
