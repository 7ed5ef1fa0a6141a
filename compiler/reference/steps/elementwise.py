"""Element steps of the elementwise ops (compiler/reference/elementwise.py): one element of
each operand, then the op's scalar operations. f16 and bf16 take part through f32 (widened,
computed, rounded once: docs/numerics.md §1); the math functions are their pinned
algorithms' steps (mathlib.py)."""

from __future__ import annotations

import struct
from collections.abc import Callable

from compiler.hlo import stochastic_convert
from compiler.hlo.ir import Instruction
from compiler.numerics import mathlib
from compiler.reference.scalar import Op
from core.dtypes import BF16, F16, F32, F64, DType, unsigned_of_width

from . import ElementEvaluator, Handle, Scope, indexing
from .mathlib import _float_bits, binary_function, unary_function
from .record import Recorder, Uncovered

NARROW = (F16, BF16)


def _dtype(instruction: Instruction, operand: int | None = None) -> DType:
    shape = instruction.shape if operand is None else instruction.operands[operand].shape
    return shape.dtype  # type: ignore[union-attr]


def _operands(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> list[int]:
    handles = [ev.operand(instruction, i, index, scope) for i in range(len(instruction.operands))]
    if any(not isinstance(h, int) for h in handles):
        raise Uncovered(instruction.opcode, "a tuple operand")
    return handles  # type: ignore[return-value]


def in_float(
    recorder: Recorder, dtype: DType, args: list[int], compute: Callable[[list[int]], int]
) -> int:
    """`compute` on f32/f64 operands directly; on f16/bf16 through f32, rounded back once."""
    if dtype not in NARROW:
        return compute(args)
    wide = [recorder.op(Op.CONVERT, a, to=F32) for a in args]
    return recorder.op(Op.CONVERT, compute(wide), to=dtype)


def _arithmetic(op: Op) -> Callable[..., Handle]:
    def rule(
        ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        args = _operands(ev, instruction, index, scope)
        dtype = _dtype(instruction, 0)
        rec = ev.recorder
        if dtype.is_complex:
            return _complex(ev, instruction, op, args)
        if dtype.is_float:
            return in_float(rec, dtype, args, lambda a: rec.op(op, *a))
        return rec.op(op, *args)

    return rule


def _complex(ev: ElementEvaluator, instruction: Instruction, op: Op, args: list[int]) -> int:
    """Complex add, subtract and negate are part by part; multiply is (ar*br - ai*bi) +
    (ar*bi + ai*br)i, each product rounded (docs/numerics.md §2)."""
    rec = ev.recorder
    parts = [(rec.op(Op.REAL, a), rec.op(Op.IMAG, a)) for a in args]
    if op in (Op.ADD, Op.SUB):
        (ar, ai), (br, bi) = parts
        return rec.op(Op.COMPLEX, rec.op(op, ar, br), rec.op(op, ai, bi))
    if op is Op.NEG:
        ((ar, ai),) = parts
        return rec.op(Op.COMPLEX, rec.op(Op.NEG, ar), rec.op(Op.NEG, ai))
    if op is Op.MUL:
        (ar, ai), (br, bi) = parts
        real = rec.op(Op.SUB, rec.op(Op.MUL, ar, br), rec.op(Op.MUL, ai, bi))
        imag = rec.op(Op.ADD, rec.op(Op.MUL, ar, bi), rec.op(Op.MUL, ai, br))
        return rec.op(Op.COMPLEX, real, imag)
    raise Uncovered(
        instruction.opcode,
        "complex division and abs (Smith's algorithm with its repairs) have no element steps yet",
    )


def _unary(op: Op) -> Callable[..., Handle]:
    def rule(
        ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        (x,) = _operands(ev, instruction, index, scope)
        dtype = _dtype(instruction, 0)
        rec = ev.recorder
        if dtype.is_complex:
            return _complex(ev, instruction, op, [x])
        if dtype.is_float:
            return in_float(rec, dtype, [x], lambda a: rec.op(op, *a))
        return rec.op(op, x)

    return rule


def _round_half_away(rec: Recorder, x: int) -> int:
    """t = trunc(x); t + copysign(1, x) when |x - t| >= 0.5, else t (docs/numerics.md §2)."""
    dtype = rec.dtype(x)
    t = rec.op(Op.TRUNC, x)
    far = rec.op(Op.GE, rec.op(Op.ABS, rec.op(Op.SUB, x, t)), _constant(rec, dtype, 0.5))
    away = rec.op(Op.ADD, t, rec.op(Op.COPYSIGN, _constant(rec, dtype, 1.0), x))
    return rec.op(Op.SELECT, far, away, t)


def _constant(rec: Recorder, dtype: DType, value: float) -> int:
    if dtype is F64:
        return rec.const(F64, _float_bits(value))
    return rec.const(F32, struct.unpack("<I", struct.pack("<f", value))[0])


def _round_nearest_afz(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    (x,) = _operands(ev, instruction, index, scope)
    return in_float(
        ev.recorder, _dtype(instruction, 0), [x], lambda a: _round_half_away(ev.recorder, a[0])
    )


def _math(name: str) -> Callable[..., Handle]:
    def rule(
        ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        args = _operands(ev, instruction, index, scope)
        dtype = _dtype(instruction, 0)
        rec = ev.recorder
        if name in ("power", "atan2"):
            if not dtype.is_float:
                return rec.op(Op.POW, *args)
            return in_float(rec, dtype, args, lambda a: binary_function(rec, name, a[0], a[1]))
        return in_float(rec, dtype, args, lambda a: unary_function(rec, name, a[0]))

    return rule


def _is_finite(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    (x,) = _operands(ev, instruction, index, scope)
    rec = ev.recorder
    if _dtype(instruction, 0) in NARROW:
        x = rec.op(Op.CONVERT, x, to=F32)
    return rec.op(Op.IS_FINITE, x)


_DIRECTIONS = {"EQ": Op.EQ, "NE": Op.NE, "LT": Op.LT, "LE": Op.LE, "GT": Op.GT, "GE": Op.GE}


def _compare(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    a, b = _operands(ev, instruction, index, scope)
    dtype = _dtype(instruction, 0)
    op = _DIRECTIONS[str(instruction.attrs["direction"])]
    rec = ev.recorder
    if dtype.is_float and instruction.attrs.get("type") == "TOTALORDER":
        return rec.op(op, rec.op(Op.TOTAL_KEY, a), rec.op(Op.TOTAL_KEY, b))
    if dtype in NARROW:
        a, b = rec.op(Op.CONVERT, a, to=F32), rec.op(Op.CONVERT, b, to=F32)
    return rec.op(op, a, b)


def _select(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    p, a, b = _operands(ev, instruction, index, scope)
    return ev.recorder.op(Op.SELECT, p, a, b)


def _clamp(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    """minimum(hi, maximum(lo, x)), each the contract's op."""
    low, x, high = _operands(ev, instruction, index, scope)
    dtype = _dtype(instruction)
    rec = ev.recorder
    if dtype.is_float:
        return in_float(
            rec, dtype, [low, x, high], lambda a: rec.op(Op.MIN, a[2], rec.op(Op.MAX, a[0], a[1]))
        )
    return rec.op(Op.MIN, high, rec.op(Op.MAX, low, x))


def _convert(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    (x,) = _operands(ev, instruction, index, scope)
    source, target = _dtype(instruction, 0), _dtype(instruction)
    if source == target:  # the operand's bits, unchanged
        return x
    if source.is_complex and not target.is_complex:
        raise Uncovered("convert", "complex to real is rejected by the contract")
    return ev.recorder.op(Op.CONVERT, x, to=target)


def _bitcast_convert(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    source, target = _dtype(instruction, 0), _dtype(instruction)
    if source.bits != target.bits:
        return _bitcast_between_widths(ev, instruction, index, scope)
    (x,) = _operands(ev, instruction, index, scope)
    return x if source == target else ev.recorder.op(Op.BITCAST, x, to=target)


def _bitcast_between_widths(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    """The little-endian pieces (compiler/reference/elementwise.py): the narrow side has an
    extra minor dimension of width ratio, least significant piece first. Wide from narrow:
    each piece's bits zero-extended, shifted to its place and ORed; narrow from wide: the
    wide bits shifted right logically and truncated. Both as unsigned integers, bitcast at
    the ends."""
    rec = ev.recorder
    source, target = _dtype(instruction, 0), _dtype(instruction)
    if any(t.is_sub_byte or t.is_complex or t.name == "pred" for t in (source, target)):
        raise Uncovered("bitcast-convert", f"{source.name} to {target.name}: not whole bytes of a real type")
    wide, narrow = unsigned_of_width(max(source.bits, target.bits)), unsigned_of_width(min(source.bits, target.bits))

    def as_unsigned(x: int) -> int:
        unsigned = unsigned_of_width(rec.dtype(x).bits)
        return x if rec.dtype(x) == unsigned else rec.op(Op.BITCAST, x, to=unsigned)

    def to_target(x: int) -> int:
        return x if target == unsigned_of_width(target.bits) else rec.op(Op.BITCAST, x, to=target)

    if source.bits < target.bits:
        merged = None
        for j in range(target.bits // source.bits):
            piece = ev.operand(instruction, 0, (*index, indexing.const(rec, j)), scope)
            assert isinstance(piece, int)
            bits = rec.op(Op.CONVERT, as_unsigned(piece), to=wide)
            if j:
                bits = rec.op(Op.SHL, bits, rec.const(wide, j * source.bits))
            merged = bits if merged is None else rec.op(Op.OR, merged, bits)
        assert merged is not None
        return to_target(merged)
    x = ev.operand(instruction, 0, index[:-1], scope)
    assert isinstance(x, int)
    shifted = rec.op(Op.SHR_LOGICAL, as_unsigned(x), rec.op(Op.MUL, rec.op(Op.CONVERT, index[-1], to=wide), rec.const(wide, target.bits)))
    return to_target(rec.op(Op.CONVERT, shifted, to=narrow))


def _real_imag(op: Op) -> Callable[..., Handle]:
    def rule(
        ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        (x,) = _operands(ev, instruction, index, scope)
        if _dtype(instruction, 0).is_complex:
            return ev.recorder.op(op, x)
        # Of a real operand: the value itself, and +0.
        return x if op is Op.REAL else ev.recorder.const(_dtype(instruction), 0)

    return rule


def _complex_make(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    real, imag = _operands(ev, instruction, index, scope)
    return ev.recorder.op(Op.COMPLEX, real, imag)


def _map(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    computation = instruction.called_computations()[0]
    return ev.apply_scalar(computation, _operands(ev, instruction, index, scope))


def _stochastic_convert(
    ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
) -> Handle:
    """XLA's decomposition, op by op (compiler/hlo/stochastic_convert.py)."""
    expansion = ev.keep(stochastic_convert.expansion(instruction))
    inner = ev.scope(lambda number, at: ev.operand(instruction, number, at, scope))
    return ev.element(expansion.root, index, inner)


RULES = {
    "add": _arithmetic(Op.ADD),
    "subtract": _arithmetic(Op.SUB),
    "multiply": _arithmetic(Op.MUL),
    "divide": _arithmetic(Op.DIV),
    "remainder": _arithmetic(Op.REM),
    "maximum": _arithmetic(Op.MAX),
    "minimum": _arithmetic(Op.MIN),
    "and": _arithmetic(Op.AND),
    "or": _arithmetic(Op.OR),
    "xor": _arithmetic(Op.XOR),
    "shift-left": _arithmetic(Op.SHL),
    "shift-right-logical": _arithmetic(Op.SHR_LOGICAL),
    "shift-right-arithmetic": _arithmetic(Op.SHR_ARITH),
    "negate": _unary(Op.NEG),
    "abs": _unary(Op.ABS),
    "sign": _unary(Op.SIGN),
    "not": _unary(Op.NOT),
    "popcnt": _unary(Op.POPCNT),
    "count-leading-zeros": _unary(Op.CLZ),
    "floor": _unary(Op.FLOOR),
    "ceil": _unary(Op.CEIL),
    "round-nearest-even": _unary(Op.RINT),
    "sqrt": _unary(Op.SQRT),
    "round-nearest-afz": _round_nearest_afz,
    "power": _math("power"),
    "atan2": _math("atan2"),
    **{opcode: _math(name) for opcode, name in mathlib.UNARY_OPCODES.items()},
    "is-finite": _is_finite,
    "compare": _compare,
    "select": _select,
    "clamp": _clamp,
    "convert": _convert,
    "bitcast-convert": _bitcast_convert,
    "real": _real_imag(Op.REAL),
    "imag": _real_imag(Op.IMAG),
    "complex": _complex_make,
    "map": _map,
    "stochastic-convert": _stochastic_convert,
}

__all__ = ["NARROW", "RULES", "in_float"]
