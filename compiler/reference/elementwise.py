"""Elementwise ops: arithmetic, comparisons, selection, bitwise ops, conversions and the math
functions. Every handler works on arrays of any shape (so scalar computations can be applied
to whole arrays at once) and takes element types from the instruction, never from numpy."""

from __future__ import annotations

import numpy as np

from compiler.hlo import stochastic_convert
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.numerics import complexes, floats, integers, mathlib
from compiler.numerics import convert as conversions
from compiler.reference.control_flow import callee
from compiler.reference.evaluator import Evaluator, Handler, Value
from core.dtypes import BF16, F16, DType


def _dtype(instruction: Instruction, operand: int | None = None) -> DType:
    shape = instruction.shape if operand is None else instruction.operands[operand].shape
    return shape.dtype  # type: ignore[union-attr]


def _in_f32(function, dtype: DType, *args: np.ndarray) -> np.ndarray:
    """Applies an f32 function to narrow-float arguments and rounds the result back, the
    contract's rule for f16 and bf16."""
    widened = [np.asarray(floats.to_f32(a, dtype)) for a in args]
    return floats.round_from_f32(function(*widened), dtype)


def _float_op(function, dtype: DType, *args: np.ndarray) -> np.ndarray:
    """`function` (exact IEEE arithmetic in the argument type) on f32/f64 directly, on f16/bf16
    through f32; canonical NaN."""
    if dtype in (F16, BF16):
        return _in_f32(lambda *a: function(*a).astype(np.float32), dtype, *args)
    result = function(*(np.asarray(a, dtype=dtype.numpy) for a in args))
    return floats.canonicalize_nans(np.asarray(result, dtype=dtype.numpy), dtype)


def _math(name: str, dtype: DType, x: np.ndarray) -> np.ndarray:
    if dtype in (F16, BF16):
        return _in_f32(lambda v: mathlib.unary(name, v), dtype, x)
    return mathlib.unary(name, np.asarray(x, dtype=dtype.numpy))


# --- unary -----------------------------------------------------------------------------------


def _negate(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    dtype = _dtype(instruction)
    if dtype.is_complex:
        return complexes.negate(x, dtype)
    if dtype.is_float:
        return _float_op(np.negative, dtype, x)
    return np.negative(x).astype(dtype.numpy) if dtype.is_signed else (np.zeros_like(x) - x).astype(dtype.numpy)


def _abs(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    dtype = _dtype(instruction)
    if _dtype(instruction, 0).is_complex:
        return complexes.absolute(x, _dtype(instruction, 0))
    if dtype.is_float:
        return _float_op(np.abs, dtype, x)
    return np.abs(x).astype(dtype.numpy) if dtype.is_signed else np.array(x, copy=True)


def _sign(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    dtype = _dtype(instruction)
    if dtype.is_complex:
        return complexes.sign(x, dtype)
    if dtype.is_float:
        # sign(+-0) = +-0, sign(NaN) = NaN, otherwise +-1.
        return _float_op(lambda v: np.where(v == 0, v, np.sign(v)), dtype, x)
    return np.sign(x).astype(dtype.numpy)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    truncated = np.trunc(v)
    # v - trunc(v) is exact for every binary float.
    return np.where(np.abs(v - truncated) >= 0.5, truncated + np.copysign(1.0, v).astype(v.dtype), truncated)


_FLOAT_UNARY = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round-nearest-even": np.rint,
    "round-nearest-afz": _round_half_away,
    "sqrt": np.sqrt,
}



def _not(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    if _dtype(instruction).is_pred:
        return np.logical_not(x)
    return np.invert(x)


def _reduce_precision(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    exponent_bits, mantissa_bits = instruction.attrs["exponent_bits"], instruction.attrs["mantissa_bits"]
    return floats.reduce_precision(x, _dtype(instruction), exponent_bits, mantissa_bits)  # type: ignore[arg-type]


def _popcnt(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    return integers.wrap(integers.population_count(x, _dtype(instruction)), _dtype(instruction))


def _count_leading_zeros(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    return integers.wrap(integers.count_leading_zeros(x, _dtype(instruction)), _dtype(instruction))


def _is_finite(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    dtype = _dtype(instruction, 0)
    return np.isfinite(floats.to_f32(x, dtype) if dtype in (F16, BF16) else x)


def _convert(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    return conversions.convert(x, _dtype(instruction, 0), _dtype(instruction))


def _bitcast_convert(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    source, target = _dtype(instruction, 0), _dtype(instruction)
    data = np.require(x, requirements="C")
    if source.bits == target.bits:
        return data.view(target.numpy).copy()
    # Different widths: bytes in little-endian order; the narrow side has an extra minor
    # dimension holding the pieces, least significant first.
    little = data.astype(data.dtype.newbyteorder("<"), copy=False)
    if source.bits > target.bits:
        ratio = source.bits // target.bits
        pieces = little.view(np.dtype(target.numpy).newbyteorder("<")).reshape(data.shape + (ratio,))
        return pieces.astype(target.numpy)
    merged = little.view(np.dtype(target.numpy).newbyteorder("<")).reshape(data.shape[:-1])
    return merged.astype(target.numpy)


def _real(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    return complexes.parts(x)[0] if _dtype(instruction, 0).is_complex else np.array(x, copy=True)


def _imag(instruction: Instruction, x: np.ndarray) -> np.ndarray:
    """The imaginary part; +0 for a real number (as XLA)."""
    return complexes.parts(x)[1] if _dtype(instruction, 0).is_complex else np.zeros_like(x)


def _copy(instruction: Instruction, x: Value) -> Value:
    return x if isinstance(x, tuple) else np.array(x, copy=True)


def _unary_handler(function) -> Handler:
    def handler(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
        return function(instruction, operands[0])

    return handler


def _float_unary_handler(function) -> Handler:
    def handler(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
        return _float_op(function, _dtype(instruction), operands[0])

    return handler


def _math_handler(name: str) -> Handler:
    def handler(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
        return _math(name, _dtype(instruction), operands[0])

    return handler


# --- binary ----------------------------------------------------------------------------------


def float_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE maximum that propagates NaN and orders -0 below +0."""
    result = np.maximum(a, b)
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), a, np.abs(a)), result)


def float_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE minimum that propagates NaN and orders -0 below +0."""
    result = np.minimum(a, b)
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), -np.abs(a), a), result)


def _maximum(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype.is_float:
        return _float_op(float_maximum, dtype, a, b)
    if dtype.is_pred:
        return np.logical_or(a, b)
    return np.maximum(a, b).astype(dtype.numpy)


def _minimum(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype.is_float:
        return _float_op(float_minimum, dtype, a, b)
    if dtype.is_pred:
        return np.logical_and(a, b)
    return np.minimum(a, b).astype(dtype.numpy)


def _arithmetic(float_function, int_function, pred_function=None):
    def apply(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if dtype.is_float:
            return _float_op(float_function, dtype, a, b)
        if dtype.is_pred:
            assert pred_function is not None
            return pred_function(a, b)
        return np.asarray(int_function(a, b)).astype(dtype.numpy)

    return apply


def _float_power(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype in (F16, BF16):
        return _in_f32(mathlib.power, dtype, a, b)
    return mathlib.power(np.asarray(a, dtype.numpy), np.asarray(b, dtype.numpy))


def _power(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype.is_float:
        return _float_power(dtype, a, b)
    return integers.power(a, b, dtype)


def _atan2(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype in (F16, BF16):
        return _in_f32(mathlib.atan2, dtype, a, b)
    return mathlib.atan2(np.asarray(a, dtype.numpy), np.asarray(b, dtype.numpy))


def _divide(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype.is_float:
        return _float_op(np.divide, dtype, a, b)
    return integers.divide(a, b, dtype)


def _remainder(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype.is_float:
        return _float_op(np.fmod, dtype, a, b)
    return integers.remainder(a, b, dtype)


def _bitwise(pred_function, int_function):
    def apply(dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if dtype.is_pred:
            return pred_function(a, b)
        return int_function(a, b).astype(dtype.numpy)

    return apply


_BINARY = {
    "add": _arithmetic(np.add, np.add, np.logical_or),
    "subtract": _arithmetic(np.subtract, np.subtract),
    "multiply": _arithmetic(np.multiply, np.multiply, np.logical_and),
    "divide": _divide,
    "remainder": _remainder,
    "maximum": _maximum,
    "minimum": _minimum,
    "power": _power,
    "atan2": _atan2,
    "and": _bitwise(np.logical_and, np.bitwise_and),
    "or": _bitwise(np.logical_or, np.bitwise_or),
    "xor": _bitwise(np.logical_xor, np.bitwise_xor),
    "shift-left": lambda dtype, a, b: integers.shift_left(a, b, dtype),
    "shift-right-logical": lambda dtype, a, b: integers.shift_right_logical(a, b, dtype),
    "shift-right-arithmetic": lambda dtype, a, b: integers.shift_right_arithmetic(a, b, dtype),
}


# The binary ops on complex values (the verifier admits no others).
_COMPLEX_BINARY = {
    "add": complexes.add,
    "subtract": complexes.subtract,
    "multiply": complexes.multiply,
    "divide": complexes.divide,
    "complex": lambda a, b, dtype: complexes.make(a, b, dtype),
}


def _binary_handler(function) -> Handler:
    def handler(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
        a, b = np.asarray(operands[0]), np.asarray(operands[1])
        dtype = _dtype(instruction)
        if dtype.is_complex:
            return _COMPLEX_BINARY[instruction.opcode](a, b, dtype)
        return function(dtype, a, b)

    return handler


_COMPARISONS = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}


def compare(a: np.ndarray, b: np.ndarray, dtype: DType, direction: str, kind: str | None) -> np.ndarray:
    """The compare op: IEEE comparisons for FLOAT (NaN unordered), the IEEE totalOrder for
    TOTALORDER, and integer order otherwise."""
    function = _COMPARISONS[direction]
    if dtype.is_complex:  # EQ or NE only (the verifier's rule)
        same = complexes.equal(a, b)
        return same if direction == "EQ" else ~same
    if dtype.is_float:
        if kind == "TOTALORDER":
            return function(floats.total_order_key(np.asarray(a, dtype.numpy), dtype),
                            floats.total_order_key(np.asarray(b, dtype.numpy), dtype))  # fmt: skip
        if dtype in (F16, BF16):
            return function(floats.to_f32(a, dtype), floats.to_f32(b, dtype))
        return function(a, b)
    if dtype.is_pred:
        return function(np.asarray(a, np.uint8), np.asarray(b, np.uint8))
    return function(a, b)


def _compare(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    dtype = _dtype(instruction, 0)
    direction = str(instruction.attrs["direction"])
    kind = instruction.attrs.get("type")
    return compare(np.asarray(operands[0]), np.asarray(operands[1]), dtype, direction, kind)  # type: ignore[arg-type]


def _select(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    pred, on_true, on_false = (np.asarray(v) for v in operands)
    return np.where(pred, on_true, on_false).astype(_dtype(instruction).numpy)


def _clamp(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    low, x, high = (np.asarray(v) for v in operands)
    dtype = _dtype(instruction)
    return _minimum(dtype, high, _maximum(dtype, low, x))


def _stochastic_convert(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return evaluator.evaluate_computation(stochastic_convert.expansion(instruction), operands)


def _map(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    results = evaluator.apply_scalar_computation(callee(instruction), [np.asarray(o) for o in operands])
    return results[0].astype(instruction.array_shape.dtype.numpy)


# Most handlers are made per opcode from a scalar function, so the table takes them all from
# this mapping rather than from module functions named after the opcodes.
_MADE: dict[str, Handler] = {
    "negate": _unary_handler(_negate),
    "abs": _unary_handler(_abs),
    "sign": _unary_handler(_sign),
    "not": _unary_handler(_not),
    "is-finite": _unary_handler(_is_finite),
    "reduce-precision": _unary_handler(_reduce_precision),
    "popcnt": _unary_handler(_popcnt),
    "count-leading-zeros": _unary_handler(_count_leading_zeros),
    "convert": _unary_handler(_convert),
    "bitcast-convert": _unary_handler(_bitcast_convert),
    "copy": _unary_handler(_copy),
    "real": _unary_handler(_real),
    "imag": _unary_handler(_imag),
    **{op: _float_unary_handler(fn) for op, fn in _FLOAT_UNARY.items()},
    **{op: _math_handler(name) for op, name in mathlib.UNARY_OPCODES.items()},
    **{op: _binary_handler(fn) for op, fn in _BINARY.items()},
    "complex": _binary_handler(None),
    "compare": _compare,
    "select": _select,
    "clamp": _clamp,
    "map": _map,
    "stochastic-convert": _stochastic_convert,
}
HANDLERS: dict[str, Handler] = family_table("elementwise", {}, shared=_MADE)

