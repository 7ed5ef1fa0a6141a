"""The operations interface that the pinned algorithms are written against.

Every pinned algorithm of the math library is written once, as plain Python over abstract
values, and executed by two backends:

* `compiler.numerics.mathlib.numpy_ops.NUMPY`: values are numpy arrays (the reference);
* `compiler.codegen.mathlib_ir.IROps`: values wrap llvmlite IR values, scalar or
  `<W x double>`; running an algorithm emits its instructions.

Values
  A float value (binary64 lanes), an int value (int64 lanes) or a mask (boolean lanes). They
  support the Python operators, each of which is one IEEE or integer operation, evaluated in
  Python's order (left to right, as parenthesised), never fused or reassociated:

  * float: `+ - * /`, unary `-` (sign flip), `< <= > >= == !=` (IEEE: false on NaN, except
    `!=`), with Python floats as constants on either side.
  * int: `+ - *` (wrapping), `//` by a positive constant (floor division), `& | ^`,
    `>>` (arithmetic) and `<<` by a constant in [0, 63], unary `-`, the comparisons (signed).
  * mask: `& | ^ ~`.

  Python floats and ints stand for constants. Arithmetic between two Python constants is
  done by Python itself in binary64 (round to nearest even), as the backends would do it.

Operations (methods of the `ops` object; every one is exact unless it says it rounds)
  where(c, a, b)           a where c else b, bits unchanged (a and b float or int)
  abs(x), copysign(x, s)   clear or set the sign bit
  sqrt(x)                  IEEE square root (rounds)
  rint(x), floor(x)        round to an integral value (ties to even for rint)
  minimum(a, b), maximum   a if a < b (a > b) else b: operands are never NaN here
  isnan, isfinite, isinf   masks of a float value
  signbit(x)               mask of the sign bit
  bits(x), from_bits(i)    reinterpret binary64 <-> int64
  to_int(x), to_float(i)   integer-valued binary64 <-> int64, only for magnitudes below 2**51
  table(t, i)              t.values[i] for an index 0 <= i < len(t) (a constant Table)
  branch(c, f, g, args, safe_true, safe_false)
                           f(*args) where c, g(*args) elsewhere; f and g return a value or a
                           tuple of values. A backend may evaluate a path only on its own
                           lanes (numpy compresses) or on all lanes and select (IR); then the
                           other lanes' arguments are replaced by the `safe_*` constants, so a
                           path never sees an argument outside its domain.

The algorithms must not depend on anything else: no numpy calls, no data-dependent Python
control flow on values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

Value = Any  # a backend value (numpy array or IR value wrapper) or a Python constant


class Table:
    """A constant lookup table of the pinned algorithms (binary64 or int64 entries).

    `name` identifies the table across backends (the IR global is named after it).
    """

    __slots__ = ("array", "is_float", "name", "values")

    def __init__(self, name: str, values: Sequence[float] | Sequence[int]) -> None:
        self.name = name
        self.values = tuple(values)
        self.is_float = all(isinstance(v, float) for v in self.values)
        if not self.is_float and not all(isinstance(v, int) for v in self.values):
            raise TypeError(f"table {name}: entries must be all floats or all ints")
        self.array = np.array(self.values, dtype=np.float64 if self.is_float else np.int64)

    def __len__(self) -> int:
        return len(self.values)


class Ops(Protocol):
    """The operations a backend provides (see the module docstring for their meaning)."""

    def where(self, c: Value, a: Value, b: Value) -> Value: ...
    def abs(self, x: Value) -> Value: ...
    def copysign(self, x: Value, s: Value) -> Value: ...
    def sqrt(self, x: Value) -> Value: ...
    def rint(self, x: Value) -> Value: ...
    def floor(self, x: Value) -> Value: ...
    def minimum(self, a: Value, b: Value) -> Value: ...
    def maximum(self, a: Value, b: Value) -> Value: ...
    def isnan(self, x: Value) -> Value: ...
    def isfinite(self, x: Value) -> Value: ...
    def isinf(self, x: Value) -> Value: ...
    def signbit(self, x: Value) -> Value: ...
    def bits(self, x: Value) -> Value: ...
    def from_bits(self, i: Value) -> Value: ...
    def to_int(self, x: Value) -> Value: ...
    def to_float(self, i: Value) -> Value: ...
    def table(self, t: Table, i: Value) -> Value: ...

    def branch(
        self,
        c: Value,
        if_true: Callable[..., Any],
        if_false: Callable[..., Any],
        args: tuple[Value, ...],
        safe_true: tuple[float | int, ...],
        safe_false: tuple[float | int, ...],
    ) -> Any: ...
