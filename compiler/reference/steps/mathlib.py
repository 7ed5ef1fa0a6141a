"""The math functions' steps: the pinned algorithms (compiler/numerics/mathlib/) run on a
third backend of their DSL, whose values are steps.

`StepOps` executes an algorithm once, on one element, and records every binary64 and int64
operation it performs. The program it records does not depend on the element's value: a
`branch` records both paths, each on its arguments where they take it and on the safe
constants elsewhere, then selects, as the vector IR backend does; `where` records both
operands. So one function has one step program, whatever its operand.

An f32 function is the binary64 algorithm on the exactly widened operand, then ROUND_F32_CR,
which the machine decides unless the value lies within the ambiguity band of a binary32
rounding boundary (docs/numerics.md §3); there the step records the reference's correctly
rounded value and is marked undecided.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.numerics.mathlib import BINARY_ALGORITHMS, UNARY_ALGORITHMS
from compiler.numerics.mathlib import unary as reference_unary
from compiler.numerics.mathlib.dsl import Table
from compiler.reference.scalar import Op, to_array, to_bits
from core.dtypes import F32, F64, PRED, S64, DType

from .record import Recorder

_MASK64 = (1 << 64) - 1


def _float_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


class V:
    """A DSL value: a step of type f64 (float), s64 (int) or pred (mask)."""

    __slots__ = ("handle", "ops")
    __hash__ = None  # type: ignore[assignment]  # == records a step

    def __init__(self, ops: StepOps, handle: int) -> None:
        self.ops = ops
        self.handle = handle

    @property
    def dtype(self) -> DType:
        return self.ops.recorder.dtype(self.handle)

    def __bool__(self) -> bool:
        raise TypeError("a pinned algorithm may not branch in Python on a value")

    def _binary(self, op: Op, other: Any, reflected: bool = False) -> V:
        other_handle = self.ops.lift(other, self.dtype)
        args = (other_handle, self.handle) if reflected else (self.handle, other_handle)
        return self.ops.apply(op, *args)

    def __add__(self, o: Any) -> V:
        return self._binary(Op.ADD, o)

    def __radd__(self, o: Any) -> V:
        return self._binary(Op.ADD, o, True)

    def __sub__(self, o: Any) -> V:
        return self._binary(Op.SUB, o)

    def __rsub__(self, o: Any) -> V:
        return self._binary(Op.SUB, o, True)

    def __mul__(self, o: Any) -> V:
        return self._binary(Op.MUL, o)

    def __rmul__(self, o: Any) -> V:
        return self._binary(Op.MUL, o, True)

    def __truediv__(self, o: Any) -> V:
        return self._binary(Op.DIV, o)

    def __rtruediv__(self, o: Any) -> V:
        return self._binary(Op.DIV, o, True)

    def __floordiv__(self, o: Any) -> V:
        return self._binary(Op.FLOOR_DIV, o)

    def __and__(self, o: Any) -> V:
        return self._binary(Op.AND, o)

    def __rand__(self, o: Any) -> V:
        return self._binary(Op.AND, o, True)

    def __or__(self, o: Any) -> V:
        return self._binary(Op.OR, o)

    def __ror__(self, o: Any) -> V:
        return self._binary(Op.OR, o, True)

    def __xor__(self, o: Any) -> V:
        return self._binary(Op.XOR, o)

    def __rxor__(self, o: Any) -> V:
        return self._binary(Op.XOR, o, True)

    def __lshift__(self, o: Any) -> V:
        return self._binary(Op.SHL, o)

    def __rshift__(self, o: Any) -> V:
        return self._binary(Op.SHR_ARITH, o)

    def __neg__(self) -> V:
        return self.ops.apply(Op.NEG, self.handle)

    def __invert__(self) -> V:
        return self.ops.apply(Op.NOT, self.handle)

    def __lt__(self, o: Any) -> V:
        return self._binary(Op.LT, o)

    def __le__(self, o: Any) -> V:
        return self._binary(Op.LE, o)

    def __gt__(self, o: Any) -> V:
        return self._binary(Op.GT, o)

    def __ge__(self, o: Any) -> V:
        return self._binary(Op.GE, o)

    def __eq__(self, o: Any) -> V:  # type: ignore[override]
        return self._binary(Op.EQ, o)

    def __ne__(self, o: Any) -> V:  # type: ignore[override]
        return self._binary(Op.NE, o)


class StepOps:
    """The DSL's operations (compiler/numerics/mathlib/dsl.py) as recorded steps."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    # --- values ------------------------------------------------------------------------------
    def lift(self, value: Any, like: DType | None = None) -> int:
        """The handle of a DSL value: a V's step, or a constant step for a Python number (of
        the type `like` when given, else f64 for floats and s64 for ints)."""
        if isinstance(value, V):
            return value.handle
        if isinstance(value, bool | np.bool_):
            return self.recorder.const(PRED, int(bool(value)))
        dtype = like or (F64 if isinstance(value, float) else S64)
        if dtype is F64:
            return self.recorder.const(F64, _float_bits(float(value)))
        if dtype is S64:
            if isinstance(value, float):
                raise TypeError(f"float constant {value!r} where the algorithm computes on int64")
            return self.recorder.const(S64, int(value) & _MASK64)
        return self.recorder.const(PRED, int(bool(value)))

    def apply(self, op: Op, *handles: int, to: DType | None = None) -> V:
        return V(self, self.recorder.op(op, *handles, to=to))

    def _unary(self, op: Op, x: Any, to: DType | None = None) -> V:
        return self.apply(op, self.lift(x), to=to)

    # --- the DSL's operations ---------------------------------------------------------------
    def where(self, c: Any, a: Any, b: Any) -> V:
        like = a.dtype if isinstance(a, V) else b.dtype if isinstance(b, V) else None
        return self.apply(Op.SELECT, self.lift(c, PRED), self.lift(a, like), self.lift(b, like))

    def abs(self, x: Any) -> V:
        return self._unary(Op.ABS, x)

    def copysign(self, x: Any, s: Any) -> V:
        return self.apply(Op.COPYSIGN, self.lift(x, F64), self.lift(s, F64))

    def sqrt(self, x: Any) -> V:
        return self._unary(Op.SQRT, x)

    def rint(self, x: Any) -> V:
        return self._unary(Op.RINT, x)

    def floor(self, x: Any) -> V:
        return self._unary(Op.FLOOR, x)

    def minimum(self, a: Any, b: Any) -> V:
        """`a if a < b else b` (the DSL's minimum: its operands are never NaN)."""
        like = a.dtype if isinstance(a, V) else b.dtype
        a_handle, b_handle = self.lift(a, like), self.lift(b, like)
        return self.apply(
            Op.SELECT, self.recorder.op(Op.LT, a_handle, b_handle), a_handle, b_handle
        )

    def maximum(self, a: Any, b: Any) -> V:
        like = a.dtype if isinstance(a, V) else b.dtype
        a_handle, b_handle = self.lift(a, like), self.lift(b, like)
        return self.apply(
            Op.SELECT, self.recorder.op(Op.GT, a_handle, b_handle), a_handle, b_handle
        )

    def isnan(self, x: Any) -> V:
        return self._unary(Op.IS_NAN, x)

    def isfinite(self, x: Any) -> V:
        return self._unary(Op.IS_FINITE, x)

    def isinf(self, x: Any) -> V:
        return self._unary(Op.IS_INF, x)

    def signbit(self, x: Any) -> V:
        return self._unary(Op.SIGNBIT, x)

    def bits(self, x: Any) -> V:
        return self._unary(Op.BITCAST, x, to=S64)

    def from_bits(self, i: Any) -> V:
        return self.apply(Op.BITCAST, self.lift(i, S64), to=F64)

    def to_int(self, x: Any) -> V:
        return self._unary(Op.CONVERT, x, to=S64)

    def to_float(self, i: Any) -> V:
        return self.apply(Op.CONVERT, self.lift(i, S64), to=F64)

    def table(self, t: Table, i: Any) -> V:
        return V(self, self.recorder.table(t, self.lift(i, S64)))

    def branch(
        self,
        c: V,
        if_true: Callable[..., Any],
        if_false: Callable[..., Any],
        args: tuple[Any, ...],
        safe_true: tuple[float | int, ...],
        safe_false: tuple[float | int, ...],
    ) -> Any:
        """Both paths, each on its own arguments where it is taken and on the safe constants
        elsewhere, then selected: one program for every operand."""
        not_c = ~c
        got_true = if_true(*(self.where(c, a, s) for a, s in zip(args, safe_true, strict=True)))
        got_false = if_false(
            *(self.where(not_c, a, s) for a, s in zip(args, safe_false, strict=True))
        )
        if not isinstance(got_true, tuple):
            return self.where(c, got_true, got_false)
        return tuple(self.where(c, t, f) for t, f in zip(got_true, got_false, strict=True))


def unary_function(recorder: Recorder, name: str, x: int) -> int:
    """The steps of the contract function `name` (mathlib's name: exp, tanh, ...) on the f32
    or f64 step `x`; returns the result step."""
    dtype = recorder.dtype(x)
    ops = StepOps(recorder)
    wide = x if dtype is F64 else recorder.op(Op.CONVERT, x, to=F64)
    y = UNARY_ALGORITHMS[name](ops, V(ops, wide))
    result = ops.lift(y, F64)
    if dtype is F64:
        return result
    exact = to_bits(reference_unary(name, to_array(recorder.bits(x), F32)), F32)
    return recorder.op(Op.ROUND_F32_CR, result, undecided_value=exact)


def binary_function(recorder: Recorder, name: str, a: int, b: int) -> int:
    """power or atan2 on f32 or f64 steps: the binary64 algorithm, for f32 on the widened
    operands and rounded once (docs/numerics.md §3)."""
    dtype = recorder.dtype(a)
    ops = StepOps(recorder)
    wide = [h if dtype is F64 else recorder.op(Op.CONVERT, h, to=F64) for h in (a, b)]
    y = ops.lift(BINARY_ALGORITHMS[name](ops, V(ops, wide[0]), V(ops, wide[1])), F64)
    return y if dtype is F64 else recorder.op(Op.CONVERT, y, to=F32)


__all__ = ["StepOps", "binary_function", "unary_function"]
