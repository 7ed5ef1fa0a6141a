"""The shape rules of the elementwise ops: arithmetic, comparisons, conversions, select, clamp, map."""

from __future__ import annotations

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.opcodes import BINARY_ELEMENTWISE, UNARY_ELEMENTWISE
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import (
    array,
    attribute,
    called_computation,
    check,
    int_list,
    operand_and_declared,
    operand_count,
    operand_types,
    scalar_computation,
)
from core.dtypes import C64, C128, F32, PRED


def _unary(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    if instruction.opcode == "copy" and not isinstance(instruction.operands[0].shape, ArrayShape):
        return instruction.operands[0].shape  # a tuple's copy is the tuple
    operand = array(instruction, 0)
    operand_types(operand.dtype, instruction.opcode)
    if instruction.opcode == "reduce-precision":
        exponent_bits, mantissa_bits = attribute(instruction, "exponent_bits"), attribute(instruction, "mantissa_bits")
        check(isinstance(exponent_bits, int) and exponent_bits >= 1, "reduce-precision needs exponent_bits >= 1")
        check(isinstance(mantissa_bits, int) and mantissa_bits >= 0, "reduce-precision needs mantissa_bits >= 0")
    if instruction.opcode == "is-finite":
        return ArrayShape.of(PRED, operand.dims)
    if instruction.opcode in ("abs", "real", "imag") and operand.dtype.is_complex:
        return ArrayShape.of(operand.dtype.component, operand.dims)
    return ArrayShape.of(operand.dtype, operand.dims)


def _binary(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    lhs, rhs = array(instruction, 0), array(instruction, 1)
    check(lhs.dtype == rhs.dtype, f"operand types differ: {lhs.dtype.name} and {rhs.dtype.name}")
    check(lhs.dims == rhs.dims, f"operand dimensions differ: {list(lhs.dims)} and {list(rhs.dims)}")
    operand_types(lhs.dtype, instruction.opcode)
    if instruction.opcode == "compare":
        direction = attribute(instruction, "direction")
        check(direction in attr.COMPARISON_DIRECTIONS, f"unknown comparison direction {direction}")
        kind = instruction.attrs.get("type")
        if kind is not None:
            check(kind in attr.COMPARISON_TYPES, f"unknown comparison type {kind}")
            allowed = {"FLOAT": lhs.dtype.is_float, "TOTALORDER": lhs.dtype.is_float,
                       "SIGNED": lhs.dtype.is_signed or lhs.dtype.is_pred,
                       "UNSIGNED": lhs.dtype.is_unsigned or lhs.dtype.is_pred}  # fmt: skip
            check(allowed[kind], f"comparison type {kind} does not apply to {lhs.dtype.name}")
        check(not lhs.dtype.is_complex or direction in ("EQ", "NE"), f"complex numbers are not ordered: compare {direction} of {lhs.dtype.name}")
        return ArrayShape.of(PRED, lhs.dims)
    if instruction.opcode == "complex":
        return ArrayShape.of(C64 if lhs.dtype is F32 else C128, lhs.dims)
    return ArrayShape.of(lhs.dtype, lhs.dims)


def _convert(instruction: Instruction) -> Shape:
    operand, declared = operand_and_declared(instruction)
    check(not operand.dtype.is_complex or declared.dtype.is_complex,
          f"convert {operand.dtype.name} to {declared.dtype.name} would drop the imaginary part; take real() first")  # fmt: skip
    return ArrayShape.of(declared.dtype, operand.dims)


def _bitcast_convert(instruction: Instruction) -> Shape:
    operand, declared = operand_and_declared(instruction)
    # pred to pred is the identity, as XLA has it; pred to another type would expose how a
    # pred is held in memory, which the numerics contract leaves unsaid.
    check(operand.dtype.is_pred == declared.dtype.is_pred, f"bitcast-convert {operand.dtype.name} to {declared.dtype.name}: a pred is bitcast only to pred")
    src, dst = operand.dtype.bits, declared.dtype.bits
    check(src == dst or not (operand.dtype.is_sub_byte or declared.dtype.is_sub_byte),
          f"bitcast-convert {operand.dtype.name} to {declared.dtype.name} packs 4-bit elements, which vxla holds one "
          "per byte; this is not in the numerics contract (convert the values instead)")  # fmt: skip
    if src == dst:
        return ArrayShape.of(declared.dtype, operand.dims)
    if src > dst:
        return ArrayShape.of(declared.dtype, operand.dims + (src // dst,))
    check(operand.rank >= 1 and operand.dims[-1] == dst // src,
          f"bitcast-convert {operand.dtype.name} to {declared.dtype.name} needs a minor dimension of {dst // src}")  # fmt: skip
    return ArrayShape.of(declared.dtype, operand.dims[:-1])


def _stochastic_convert(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    operand, random = array(instruction, 0), array(instruction, 1)
    operand_types(operand.dtype, "stochastic-convert")
    check(operand.dtype.is_float and not operand.dtype.is_float8, f"stochastic-convert takes f16, bf16, f32 or f64, not {operand.dtype.name}")
    check(random.dtype.is_unsigned and random.dtype.bits == operand.dtype.bits,
          f"stochastic-convert's random bits must be unsigned of the operand's width ({operand.dtype.bits}), not {random.dtype.name}")  # fmt: skip
    check(random.dims == operand.dims, "stochastic-convert's random bits must have the operand's dimensions")
    declared = instruction.shape
    check(isinstance(declared, ArrayShape) and declared.dtype.is_signed and not declared.dtype.is_sub_byte,
          "stochastic-convert gives s8, s16, s32 or s64 (XLA defines no other)")  # fmt: skip
    assert isinstance(declared, ArrayShape)
    return ArrayShape.of(declared.dtype, operand.dims)


def _select(instruction: Instruction) -> Shape:
    operand_count(instruction, 3)
    pred, on_true, on_false = (array(instruction, i) for i in range(3))
    check(pred.dtype == PRED, f"select predicate must be pred, got {pred.dtype.name}")
    check(on_true.same_logical(on_false), f"select branches differ: {on_true} and {on_false}")
    check(pred.dims in (on_true.dims, ()), "select predicate dimensions differ from the branches'")
    return ArrayShape.of(on_true.dtype, on_true.dims)


def _clamp(instruction: Instruction) -> Shape:
    operand_count(instruction, 3)
    low, operand, high = (array(instruction, i) for i in range(3))
    for bound in (low, high):
        check(bound.dtype == operand.dtype, "clamp bounds must have the operand's type")
        check(bound.dims in (operand.dims, ()), "clamp bounds must be scalars or match the operand")
    operand_types(operand.dtype, "clamp")
    return ArrayShape.of(operand.dtype, operand.dims)


def _map(instruction: Instruction) -> Shape:
    operand_count(instruction, (1, None))
    shapes = [array(instruction, i) for i in range(len(instruction.operands))]
    for shape in shapes:
        check(shape.dims == shapes[0].dims, "map operands differ in dimensions")
    dims = int_list(instruction, "dimensions", tuple(range(shapes[0].rank)))
    check(list(dims) == list(range(shapes[0].rank)), "map must apply over all dimensions in order")
    computation = called_computation(instruction, "to_apply")
    root = computation.root.shape
    check(isinstance(root, ArrayShape) and root.rank == 0, "map computation must return a scalar")
    assert isinstance(root, ArrayShape)
    scalar_computation(computation, [s.dtype for s in shapes], [root.dtype], "map computation")
    return ArrayShape.of(root.dtype, shapes[0].dims)


RULES = family_table("elementwise", globals(), shared={**dict.fromkeys(UNARY_ELEMENTWISE, _unary), **dict.fromkeys(BINARY_ELEMENTWISE, _binary)})
