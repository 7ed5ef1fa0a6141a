"""The scalar machine: every operation the numerics contract performs on single values.

Each element of each op is, under docs/numerics.md, a fixed sequence of scalar operations
(compiler/reference/steps.py records it). This module names those operations and defines
each on bits, so that a party outside Python (the dispute contract's evaluator,
contracts/src/ScalarEval.sol) can compute any one of them and be tested against this file:

    evaluate(op, dtype, result_dtype, args) -> bits

A value is its bits as a non-negative int below 2**dtype.storage_bits: the element as held
in memory (an s4 is its sign-extended byte; a pred is 0 or 1; a c64 is the real part's bits
in the low 32 and the imaginary part's above). `dtype` is the operand type, `result_dtype`
the result's (they differ for CONVERT, BITCAST, the comparisons and the classifications).

Rules that every evaluator keeps:
- floating-point arithmetic is on f32 and f64 only (narrow types take part through CONVERT,
  the contract's rule for f16 and bf16), rounds to nearest-even with subnormals, and every
  NaN it produces is the canonical NaN, whatever the operands' payloads;
- integer arithmetic wraps in the type and is total (docs/numerics.md §2);
- SELECT, COPYSIGN, BITCAST and the part operations move bits unchanged.
The definitions reuse the reference's own numerics (compiler/numerics/), so a step and the
element the reference computes can never disagree on what an operation means.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

import numpy as np

from attest.digests import canonical_tensor_bytes
from compiler.errors import CompilerError
from compiler.numerics import convert as conversions
from compiler.numerics import floats, integers
from compiler.numerics.mathlib.correctly_rounded import ambiguous
from core.dtypes import BY_NAME, C64, C128, F32, F64, PRED, DType


class Op(IntEnum):
    """The scalar operations, with their wire codes (the contract's evaluator uses the same
    numbers; tests/contracts/test_scalar_eval.py checks the two lists agree)."""

    # arithmetic (floats: f32 and f64; integers: every width, wrapping)
    ADD = 1
    SUB = 2
    MUL = 3
    DIV = 4
    REM = 5
    MIN = 6
    MAX = 7
    NEG = 8
    ABS = 9
    SIGN = 10
    FMA = 11
    # floats only
    SQRT = 12
    FLOOR = 13
    CEIL = 14
    RINT = 15
    TRUNC = 16
    COPYSIGN = 17
    IS_NAN = 18
    IS_INF = 19
    IS_FINITE = 20
    SIGNBIT = 21
    TOTAL_KEY = 22
    ROUND_F32_CR = 23
    # comparisons (floats IEEE, integers by signedness, pred unsigned) and selection
    EQ = 30
    NE = 31
    LT = 32
    LE = 33
    GT = 34
    GE = 35
    SELECT = 36
    # integers and pred
    AND = 40
    OR = 41
    XOR = 42
    NOT = 43
    SHL = 44
    SHR_LOGICAL = 45
    SHR_ARITH = 46
    POPCNT = 47
    CLZ = 48
    POW = 49
    FLOOR_DIV = 50
    # types
    CONVERT = 60
    BITCAST = 61
    REAL = 62
    IMAG = 63
    COMPLEX = 64


# The wire codes of the element types (a step names its types by these numbers).
TYPE_CODES: dict[str, int] = {
    name: code
    for code, name in enumerate(
        (
            "pred", "s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64",
            "f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz",
            "f16", "bf16", "f32", "f64", "c64", "c128",
        )
    )
}  # fmt: skip
TYPES_BY_CODE: dict[int, DType] = {code: BY_NAME[name] for name, code in TYPE_CODES.items()}

ARITY: dict[Op, int] = {
    **{op: 2 for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.MIN, Op.MAX, Op.COPYSIGN)},
    **{op: 2 for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE)},
    **{
        op: 2
        for op in (
            Op.AND,
            Op.OR,
            Op.XOR,
            Op.SHL,
            Op.SHR_LOGICAL,
            Op.SHR_ARITH,
            Op.POW,
            Op.FLOOR_DIV,
        )
    },
    Op.FMA: 3,
    Op.SELECT: 3,
    Op.COMPLEX: 2,
}

FLOAT_ARITHMETIC_TYPES = (F32, F64)


class Undecidable(CompilerError):
    """An operation whose result the machine cannot give from its operands alone: a
    correctly rounded f32 function value too close to a rounding boundary (the reference
    settles it with MPFR, docs/numerics.md §3)."""


class ScalarError(CompilerError, ValueError):
    """An operation applied to types it is not defined on (a malformed step)."""


def arity(op: Op) -> int:
    return ARITY.get(op, 1)


def result_type(op: Op, dtype: DType, target: DType | None = None) -> DType:
    """The type of op's result on operands of `dtype` (`target` for CONVERT and BITCAST)."""
    if op in (Op.CONVERT, Op.BITCAST):
        if target is None:
            raise ScalarError(f"{op.name} needs a target type")
        return target
    if op in (
        Op.EQ,
        Op.NE,
        Op.LT,
        Op.LE,
        Op.GT,
        Op.GE,
        Op.IS_NAN,
        Op.IS_INF,
        Op.IS_FINITE,
        Op.SIGNBIT,
    ):
        return PRED
    if op is Op.TOTAL_KEY:
        return BY_NAME[f"s{dtype.bits}"]
    if op is Op.ROUND_F32_CR:
        return F32
    if op in (Op.REAL, Op.IMAG):
        return dtype.component
    if op is Op.COMPLEX:
        return C64 if dtype is F32 else C128
    return dtype


# --- bits <-> numpy ---------------------------------------------------------------------------


def _storage(dtype: DType) -> np.dtype:
    return np.dtype(f"<u{dtype.storage_bits // 8}")


def to_array(bits: int, dtype: DType) -> np.ndarray:
    """A one-element array of `dtype` holding `bits`."""
    if dtype.is_complex:
        width = dtype.component.bits
        mask = (1 << width) - 1
        parts = np.array([bits & mask, bits >> width], dtype=_storage(dtype.component))
        return parts.view(dtype.numpy)
    if dtype.is_pred:
        return np.array([bits != 0])
    return np.array([bits], dtype=_storage(dtype)).view(dtype.numpy)


def to_bits(array: np.ndarray, dtype: DType) -> int:
    """The bits of the single element of `array`, held as `dtype`."""
    value = np.asarray(array, dtype=dtype.numpy).reshape(-1)[:1]
    if dtype.is_complex:
        low, high = (int(p) for p in value.view(_storage(dtype.component)))
        return low | (high << dtype.component.bits)
    if dtype.is_pred:
        return int(bool(value[0]))
    return int(value.view(_storage(dtype))[0])


def canonical(bits: int, dtype: DType) -> int:
    """`bits` as a tensor digest holds the element: a NaN (of a float type, or a part of a
    complex one) becomes the canonical NaN; every other value is unchanged. SELECT, BITCAST
    and the part operations keep payloads, as the contract's data movement does, so a
    program's result is compared in this form."""
    return int.from_bytes(canonical_tensor_bytes(to_array(bits, dtype)), "little")


# --- evaluation -------------------------------------------------------------------------------

_FLOAT_BINARY = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.DIV: np.divide,
    Op.REM: np.fmod,
}
_FLOAT_UNARY = {
    Op.SQRT: np.sqrt,
    Op.FLOOR: np.floor,
    Op.CEIL: np.ceil,
    Op.RINT: np.rint,
    Op.TRUNC: np.trunc,
    Op.NEG: np.negative,
    Op.ABS: np.abs,
}
_COMPARE = {
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
}
_CLASSIFY = {
    Op.IS_NAN: np.isnan,
    Op.IS_INF: np.isinf,
    Op.IS_FINITE: np.isfinite,
    Op.SIGNBIT: np.signbit,
}


def float_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The contract's maximum: NaN if either is NaN, and -0 < +0."""
    both_zero = (a == 0) & (b == 0)
    return np.where(
        both_zero, np.where(np.signbit(a) & np.signbit(b), a, np.abs(a)), np.maximum(a, b)
    )


def float_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The contract's minimum: NaN if either is NaN, and -0 < +0."""
    both_zero = (a == 0) & (b == 0)
    return np.where(
        both_zero, np.where(np.signbit(a) | np.signbit(b), -np.abs(a), a), np.minimum(a, b)
    )


def _float_sign(v: np.ndarray) -> np.ndarray:
    return np.where(v == 0, v, np.sign(v))


def _float(op: Op, dtype: DType, values: list[np.ndarray]) -> np.ndarray:
    if dtype not in FLOAT_ARITHMETIC_TYPES:
        raise ScalarError(f"{op.name} computes in f32 or f64, not {dtype.name} (convert first)")
    if op in _FLOAT_BINARY:
        result = _FLOAT_BINARY[op](*values)
    elif op in _FLOAT_UNARY:
        result = _FLOAT_UNARY[op](values[0])
    elif op is Op.FMA:
        result = (floats.fma_f32 if dtype is F32 else floats.fma_f64)(*values)
    elif op is Op.MIN:
        result = float_minimum(*values)
    elif op is Op.MAX:
        result = float_maximum(*values)
    elif op is Op.SIGN:
        result = _float_sign(values[0])
    else:
        raise ScalarError(f"{op.name} is not a floating-point operation")
    return floats.canonicalize_nans(np.asarray(result, dtype=dtype.numpy), dtype)


def _integer(op: Op, dtype: DType, values: list[np.ndarray]) -> np.ndarray:
    a = values[0]
    b = values[1] if len(values) > 1 else None
    wide = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply}
    if op in wide:
        return integers.wrap(
            wide[op](a.astype(np.int64), b.astype(np.int64)).astype(np.uint64), dtype
        )
    if op is Op.NEG:
        return integers.wrap((np.uint64(0) - a.astype(np.uint64)), dtype)
    if op is Op.ABS:
        return (
            integers.wrap(np.abs(a.astype(np.int64)).astype(np.uint64), dtype)
            if dtype.is_signed
            else a.copy()
        )
    if op is Op.SIGN:
        return np.sign(a).astype(dtype.numpy)
    table = {
        Op.DIV: integers.divide,
        Op.REM: integers.remainder,
        Op.SHL: integers.shift_left,
        Op.SHR_LOGICAL: integers.shift_right_logical,
        Op.SHR_ARITH: integers.shift_right_arithmetic,
        Op.POW: integers.power,
    }
    if op in table:
        return integers.wrap(table[op](a, b, dtype), dtype)
    if op is Op.FLOOR_DIV:
        if int(b[0]) <= 0:
            return integers.divide(a, b, dtype)
        return integers.wrap(np.floor_divide(a, b), dtype)
    if op in (Op.MIN, Op.MAX):
        return (np.minimum if op is Op.MIN else np.maximum)(a, b).astype(dtype.numpy)
    if op in (Op.AND, Op.OR, Op.XOR):
        function = {Op.AND: np.bitwise_and, Op.OR: np.bitwise_or, Op.XOR: np.bitwise_xor}[op]
        return integers.wrap(function(a, b), dtype)
    if op is Op.NOT:
        return integers.wrap(np.invert(a), dtype)
    if op is Op.POPCNT:
        return integers.wrap(integers.population_count(a, dtype), dtype)
    if op is Op.CLZ:
        return integers.wrap(integers.count_leading_zeros(a, dtype), dtype)
    raise ScalarError(f"{op.name} is not an integer operation")


def _pred(op: Op, values: list[np.ndarray]) -> np.ndarray:
    functions = {
        Op.AND: np.logical_and, Op.OR: np.logical_or, Op.XOR: np.logical_xor,
        Op.ADD: np.logical_or, Op.MUL: np.logical_and, Op.MAX: np.logical_or, Op.MIN: np.logical_and,
    }  # fmt: skip
    if op is Op.NOT:
        return np.logical_not(values[0])
    if op not in functions:
        raise ScalarError(f"{op.name} is not defined on pred")
    return functions[op](*values)


def _compare(op: Op, dtype: DType, values: list[np.ndarray]) -> np.ndarray:
    a, b = values
    if dtype.is_complex:
        if op not in (Op.EQ, Op.NE):
            raise ScalarError("complex values compare EQ or NE only")
        same = (a.real == b.real) & (a.imag == b.imag)
        return same if op is Op.EQ else ~same
    if dtype.is_float and dtype not in FLOAT_ARITHMETIC_TYPES:
        raise ScalarError(f"{op.name} compares f32 or f64, not {dtype.name} (convert first)")
    if dtype.is_pred:
        a, b = a.astype(np.uint8), b.astype(np.uint8)
    return _COMPARE[op](a, b)


def _round_f32_cr(value: np.ndarray) -> np.ndarray:
    """binary64 `value` (a pinned algorithm's result) rounded to binary32, when that is the
    correctly rounded value for certain (docs/numerics.md §3, "f32: correctly rounded")."""
    rounded = value.astype(np.float32)
    if ambiguous(value, rounded)[0]:
        raise Undecidable(
            f"{float(value[0])!r} lies within the ambiguity band of a binary32 rounding boundary"
        )
    return floats.canonicalize_nans(rounded, F32)


def evaluate(op: Op, dtype: DType, args: Sequence[int], result_dtype: DType | None = None) -> int:
    """The bits of `op` applied to `args` (bits of `dtype`); raises ScalarError for an
    operation the types do not admit and Undecidable for ROUND_F32_CR near a boundary. A
    result of a sub-byte type is held as the evaluator holds it: its own bits, sign- or
    zero-extended (a BITCAST of s4 -1 to u4 is 0x0F)."""
    bits = _evaluate(Op(op), dtype, args, result_dtype)
    target = result_type(Op(op), dtype, result_dtype)
    if target.is_sub_byte:
        return to_bits(integers.wrap(to_array(bits, target), target), target)
    return bits


def _evaluate(op: Op, dtype: DType, args: Sequence[int], result_dtype: DType | None) -> int:
    if len(args) != arity(op):
        raise ScalarError(f"{op.name} takes {arity(op)} operands, got {len(args)}")
    target = result_type(op, dtype, result_dtype)
    if op is Op.SELECT:
        return args[1] if args[0] else args[2]
    if op is Op.BITCAST:
        if target.storage_bits != dtype.storage_bits:
            raise ScalarError(f"BITCAST keeps the width: {dtype.name} to {target.name}")
        return args[0]
    if op is Op.COPYSIGN:
        sign = 1 << (dtype.bits - 1)
        return (args[0] & ~sign) | (args[1] & sign)
    if op in (Op.REAL, Op.IMAG):
        width = dtype.component.bits
        return args[0] & ((1 << width) - 1) if op is Op.REAL else args[0] >> width
    if op is Op.COMPLEX:
        return args[0] | (args[1] << dtype.bits)
    values = [to_array(bits, dtype) for bits in args]
    with np.errstate(all="ignore"):
        if op is Op.CONVERT:
            result = conversions.convert(values[0], dtype, target)
        elif op in _COMPARE:
            result = _compare(op, dtype, values)
        elif op in _CLASSIFY:
            if dtype not in FLOAT_ARITHMETIC_TYPES:
                raise ScalarError(f"{op.name} classifies f32 or f64, not {dtype.name}")
            result = _CLASSIFY[op](values[0])
        elif op is Op.TOTAL_KEY:
            result = floats.total_order_key(values[0], dtype)
        elif op is Op.ROUND_F32_CR:
            if dtype is not F64:
                raise ScalarError("ROUND_F32_CR rounds an f64 value")
            result = _round_f32_cr(values[0])
        elif dtype.is_pred:
            result = _pred(op, values)
        elif dtype.is_float:
            result = _float(op, dtype, values)
        elif dtype.is_integer:
            result = _integer(op, dtype, values)
        else:
            raise ScalarError(f"{op.name} is not defined on {dtype.name}")
    return to_bits(result, target)
