"""The shape rules of the batch norm ops."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from compiler.hlo.verifier.checks import array, attribute, check, operand_count

# Operand roles: which operands have the operand's shape ("x") and which are per feature.
_BATCH_NORM_OPERANDS = {
    "batch-norm-training": ("x", "feature", "feature"),
    "batch-norm-inference": ("x", "feature", "feature", "feature", "feature"),
    "batch-norm-grad": ("x", "feature", "feature", "feature", "x"),
}


def _batch_norm(instruction: Instruction) -> Shape:
    roles = _BATCH_NORM_OPERANDS[instruction.opcode]
    operand_count(instruction, len(roles))
    operand = array(instruction, 0)
    check(operand.dtype.is_float, f"{instruction.opcode} needs floating-point operands, got {operand.dtype.name}")
    feature = attribute(instruction, "feature_index")
    check(isinstance(feature, int) and 0 <= feature < operand.rank, f"feature_index {feature} is not a dimension of {operand}")
    check(isinstance(attribute(instruction, "epsilon"), float), "epsilon must be a number")
    assert isinstance(feature, int)
    per_feature = ArrayShape.of(operand.dtype, (operand.dims[feature],))
    for index, role in enumerate(roles):
        shape = array(instruction, index)
        expected = operand if role == "x" else per_feature
        check(shape.dtype == expected.dtype and shape.dims == expected.dims,
              f"operand {index} of {instruction.opcode} must be {expected.str_without_layout()}, not {shape.str_without_layout()}")  # fmt: skip
    if instruction.opcode == "batch-norm-inference":
        return ArrayShape.of(operand.dtype, operand.dims)
    return TupleShape((ArrayShape.of(operand.dtype, operand.dims), per_feature, per_feature))


RULES = family_table("batch_norm", globals(), shared=dict.fromkeys(_BATCH_NORM_OPERANDS, _batch_norm))
