"""The shape rules of dot and convolution."""

from __future__ import annotations

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import (
    ShapeRule,
    Unsupported,
    array,
    attribute,
    check,
    check_window,
    declared_array,
    dims_in_range,
    int_list,
    operand_count,
    window_output_size,
)
from core.dtypes import DType


def _result_type_shape(instruction: Instruction, operand: ArrayShape) -> ArrayShape:
    """The written shape, whose element type the op takes; when the shape is left out (XLA
    lets it be), the operand's element type."""
    if instruction.shape is None:
        return ArrayShape.of(operand.dtype, ())
    return declared_array(instruction)


def _same_pred_use(lhs: DType, rhs: DType, result: DType, opcode: str) -> None:
    """A dot or convolution with a pred result has pred operands (an or of ands, §6); pred
    operands of a numeric one are 0 and 1. Floating-point operands with an integer result
    are refused: XLA computes that product in a float type and converts it, which the
    contract's conversion of the operands would not match."""
    if result.is_pred:
        check(lhs.is_pred and rhs.is_pred, f"{opcode} with a pred result takes pred operands, not {lhs.name} and {rhs.name}")
    if result.is_integer and (lhs.is_float or rhs.is_float):
        raise Unsupported(
            f"{opcode} of {lhs.name} and {rhs.name} with an {result.name} result is not in the numerics contract: "
            f"give it a floating-point result and convert that to {result.name}"
        )


def _dot(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    lhs, rhs = array(instruction, 0), array(instruction, 1)
    declared = _result_type_shape(instruction, lhs)
    lb, rb = int_list(instruction, "lhs_batch_dims", ()), int_list(instruction, "rhs_batch_dims", ())
    lc, rc = int_list(instruction, "lhs_contracting_dims", ()), int_list(instruction, "rhs_contracting_dims", ())
    dims_in_range(lb + lc, lhs.rank, "lhs batch and contracting dimensions")
    dims_in_range(rb + rc, rhs.rank, "rhs batch and contracting dimensions")
    check(len(lb) == len(rb) and len(lc) == len(rc), "dot batch/contracting dimension lists differ in length")
    for a, b in zip(lb + lc, rb + rc, strict=True):
        check(lhs.dims[a] == rhs.dims[b], f"dot dimension sizes differ: lhs {a} is {lhs.dims[a]}, rhs {b} is {rhs.dims[b]}")  # fmt: skip
    _same_pred_use(lhs.dtype, rhs.dtype, declared.dtype, "dot")
    # Operands are converted to the accumulation type (§6): integer and floating-point
    # operands mix as XLA's operand upcasting mixes them, by `convert` (§2).
    if declared.dtype.is_complex:  # real or complex operands, converted to the result type
        check(not (lhs.dtype.is_integer or rhs.dtype.is_integer), "dot mixes integer and complex types")
    else:
        check(not (lhs.dtype.is_complex or rhs.dtype.is_complex), f"a dot of complex operands makes a complex result, not {declared.dtype.name}")
    batch = tuple(lhs.dims[d] for d in lb)
    lhs_free = tuple(s for i, s in enumerate(lhs.dims) if i not in lb + lc)
    rhs_free = tuple(s for i, s in enumerate(rhs.dims) if i not in rb + rc)
    return ArrayShape.of(declared.dtype, batch + lhs_free + rhs_free)


def _convolution(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    lhs, rhs = array(instruction, 0), array(instruction, 1)
    declared = _result_type_shape(instruction, lhs)
    labels = attribute(instruction, "dim_labels")
    check(isinstance(labels, attr.ConvDimLabels), "convolution needs dim_labels=")
    assert isinstance(labels, attr.ConvDimLabels)
    rank = labels.num_spatial + 2
    check(lhs.rank == rank and rhs.rank == rank, f"dim_labels describe rank {rank}, operands have {lhs.rank} and {rhs.rank}")  # fmt: skip
    window = check_window(attribute(instruction, "window", attr.Window(())) if labels.num_spatial else attr.Window(()), labels.num_spatial)  # fmt: skip
    groups = attribute(instruction, "feature_group_count", 1)
    batch_groups = attribute(instruction, "batch_group_count", 1)
    assert isinstance(groups, int) and isinstance(batch_groups, int)
    check(groups >= 1 and batch_groups >= 1, "group counts must be positive")
    check(groups == 1 or batch_groups == 1, "feature_group_count and batch_group_count cannot both exceed 1")
    _same_pred_use(lhs.dtype, rhs.dtype, declared.dtype, "convolution")
    in_features = lhs.dims[labels.input_feature]
    kernel_in, kernel_out = rhs.dims[labels.kernel_input_feature], rhs.dims[labels.kernel_output_feature]
    batch = lhs.dims[labels.input_batch]
    check(in_features == kernel_in * groups, f"input features {in_features} != kernel input features {kernel_in} x feature_group_count {groups}")  # fmt: skip
    check(kernel_out % groups == 0, "kernel output features must divide by feature_group_count")
    check(batch % batch_groups == 0 and kernel_out % batch_groups == 0, "batch_group_count must divide the batch and the output features")  # fmt: skip
    for w, k in zip(window.dims, labels.kernel_spatial, strict=True):
        check(w.size == rhs.dims[k], f"window size {w.size} differs from kernel spatial size {rhs.dims[k]}")
    out = [0] * rank
    out[labels.output_batch] = batch // batch_groups
    out[labels.output_feature] = kernel_out
    for i, w in enumerate(window.dims):
        out[labels.output_spatial[i]] = window_output_size(lhs.dims[labels.input_spatial[i]], w)
    return ArrayShape.of(declared.dtype, tuple(out))


RULES: dict[str, ShapeRule] = family_table("dot_conv", globals())
