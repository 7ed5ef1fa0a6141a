"""Element steps of dot and convolution (compiler/reference/dot_conv.py): each operand
element converted to the accumulation type, then the chain from +0 over the contraction in
its pinned order, acc = fma(a, b, acc) (integers: acc + a*b, wrapping), then the result
type (f16 and bf16 rounded once, s4 and u4 wrapped, pred: whether any product was true)."""

from __future__ import annotations

import itertools

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Instruction
from compiler.numerics.order import accumulation_type
from compiler.reference.scalar import Op
from core.dtypes import DType

from . import ElementEvaluator, Handle, Scope, indexing
from .data_movement import window_source
from .record import Recorder

Index = tuple[int, ...]


def _widened(
    ev: ElementEvaluator,
    instruction: Instruction,
    number: int,
    index: Index,
    scope: Scope,
    acc_type: DType,
) -> int:
    handle = ev.operand(instruction, number, index, scope)
    assert isinstance(handle, int)
    return (
        handle
        if ev.recorder.dtype(handle) == acc_type
        else ev.recorder.op(Op.CONVERT, handle, to=acc_type)
    )


def _chain(rec: Recorder, acc_type: DType, terms: list[tuple[int, int]], result: DType) -> int:
    """+0, then one multiply-add per term, then the result type."""
    if acc_type.is_complex:
        return _complex_chain(rec, acc_type, terms)
    acc = rec.const(acc_type, 0)
    for a, b in terms:
        acc = (
            rec.op(Op.FMA, a, b, acc)
            if acc_type.is_float
            else rec.op(Op.ADD, acc, rec.op(Op.MUL, a, b))
        )
    return acc if result == acc_type else rec.op(Op.CONVERT, acc, to=result)


def _complex_chain(rec: Recorder, dtype: DType, terms: list[tuple[int, int]]) -> int:
    """Two chains in the part type: re = fma(ar, br, re); re = fma(-ai, bi, re);
    im = fma(ar, bi, im); im = fma(ai, br, im) (docs/numerics.md §6)."""
    real = imag = rec.const(dtype.component, 0)
    for a, b in terms:
        ar, ai, br, bi = (
            rec.op(Op.REAL, a),
            rec.op(Op.IMAG, a),
            rec.op(Op.REAL, b),
            rec.op(Op.IMAG, b),
        )
        real = rec.op(Op.FMA, ar, br, real)
        real = rec.op(Op.FMA, rec.op(Op.NEG, ai), bi, real)
        imag = rec.op(Op.FMA, ar, bi, imag)
        imag = rec.op(Op.FMA, ai, br, imag)
    return rec.op(Op.COMPLEX, real, imag)


def _dot(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    result = instruction.array_shape.dtype
    acc_type = accumulation_type(result)
    lhs_dims = instruction.operands[0].array_shape.dims
    rhs_dims = instruction.operands[1].array_shape.dims
    lb, rb = (
        instruction.attrs.get("lhs_batch_dims", ()),
        instruction.attrs.get("rhs_batch_dims", ()),
    )
    lc, rc = (
        instruction.attrs.get("lhs_contracting_dims", ()),
        instruction.attrs.get("rhs_contracting_dims", ()),
    )
    assert (
        isinstance(lb, tuple)
        and isinstance(rb, tuple)
        and isinstance(lc, tuple)
        and isinstance(rc, tuple)
    )
    lhs_free = [d for d in range(len(lhs_dims)) if d not in lb + lc]
    rhs_free = [d for d in range(len(rhs_dims)) if d not in rb + rc]
    batch = index[: len(lb)]
    lhs_at = index[len(lb) : len(lb) + len(lhs_free)]
    rhs_at = index[len(lb) + len(lhs_free) :]
    terms = []
    rec = ev.recorder
    for k_static in itertools.product(*(range(lhs_dims[d]) for d in lc)):
        k = tuple(indexing.const(rec, i) for i in k_static)
        lhs_index, rhs_index = [0] * len(lhs_dims), [0] * len(rhs_dims)
        for dims, values, target in (
            (lb, batch, lhs_index),
            (lhs_free, lhs_at, lhs_index),
            (lc, k, lhs_index),
            (rb, batch, rhs_index),
            (rhs_free, rhs_at, rhs_index),
            (rc, k, rhs_index),
        ):
            for d, v in zip(dims, values, strict=True):
                target[d] = v
        a = _widened(ev, instruction, 0, tuple(lhs_index), scope, acc_type)
        b = _widened(ev, instruction, 1, tuple(rhs_index), scope, acc_type)
        terms.append((a, b))
    return _chain(ev.recorder, acc_type, terms, result)


def _convolution(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    """Window positions row-major over the spatial dimensions, within each the input features
    of the output feature's group in increasing order; padding and dilation holes are +0."""
    labels = instruction.attrs["dim_labels"]
    window = instruction.attrs.get("window", attr.Window(()))
    assert isinstance(labels, attr.ConvDimLabels) and isinstance(window, attr.Window)
    groups = int(instruction.attrs.get("feature_group_count", 1))  # type: ignore[arg-type]
    batch_groups = int(instruction.attrs.get("batch_group_count", 1))  # type: ignore[arg-type]
    result = instruction.array_shape.dtype
    acc_type = accumulation_type(result)
    input_dims = instruction.operands[0].array_shape.dims
    kernel_dims = instruction.operands[1].array_shape.dims
    out_features = kernel_dims[labels.kernel_output_feature]
    group_in = kernel_dims[labels.kernel_input_feature]
    batch = input_dims[labels.input_batch] // batch_groups
    b, o = index[labels.output_batch], index[labels.output_feature]
    out_spatial = tuple(index[d] for d in labels.output_spatial)
    rec = ev.recorder
    # Which input features and batch slice feed output feature o (static divisions of o).
    group = rec.op(Op.FLOOR_DIV, o, indexing.const(rec, out_features // groups))
    feature_base = indexing.scale(rec, group, group_in)
    batch_group = rec.op(Op.FLOOR_DIV, o, indexing.const(rec, out_features // batch_groups))
    batch_index = rec.op(Op.ADD, b, indexing.scale(rec, batch_group, batch))
    spatial_dims = tuple(input_dims[d] for d in labels.input_spatial)
    out_extent = tuple(instruction.array_shape.dims[d] for d in labels.output_spatial)
    zero = rec.const(acc_type, 0)
    terms = []
    for position in itertools.product(*(range(w.size) for w in window.dims)):
        found = window_source(rec, out_spatial, position, window.dims, out_extent, spatial_dims)
        kernel_position = tuple(
            w.size - 1 - p if w.reversal else p for p, w in zip(position, window.dims, strict=True)
        )
        for feature in range(group_in):
            if found is None:
                x = zero
            else:
                valid, source = found
                x_index = [0] * len(input_dims)
                x_index[labels.input_batch] = batch_index
                x_index[labels.input_feature] = indexing.add(rec, feature_base, feature)
                for d, s in zip(labels.input_spatial, source, strict=True):
                    x_index[d] = s
                x = indexing.select(
                    rec, valid, _widened(ev, instruction, 0, tuple(x_index), scope, acc_type), zero
                )
            k_index = [0] * len(kernel_dims)
            k_index[labels.kernel_output_feature] = o
            k_index[labels.kernel_input_feature] = indexing.const(rec, feature)
            for d, p in zip(labels.kernel_spatial, kernel_position, strict=True):
                k_index[d] = indexing.const(rec, p)
            terms.append((x, _widened(ev, instruction, 1, tuple(k_index), scope, acc_type)))
    return _chain(rec, acc_type, terms, result)


RULES = {"dot": _dot, "convolution": _convolution}
