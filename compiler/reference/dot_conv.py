"""dot and convolution: each output element is a chain of fused multiply-adds over the
contraction, in a pinned order, starting from +0: acc = 0; for k: acc = fma(a[k], b[k], acc).

Operands are first converted to the accumulation type: the result type, or f32 when the result
is f16/bf16 (the f32 chain is rounded to the result type once, at the end). Integer products
and sums wrap in the result type.
"""

from __future__ import annotations

import numpy as np

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.numerics import complexes, floats, integers
from compiler.numerics.convert import convert
from compiler.numerics.order import accumulation_type
from compiler.reference.data_movement import pad_array
from compiler.reference.evaluator import Evaluator, Value
from core.dtypes import BF16, F16, F32, F64, DType


def multiply_add(a: np.ndarray, b: np.ndarray, acc: np.ndarray, dtype: DType) -> np.ndarray:
    """One step of the chain in the accumulation type `dtype`."""
    if dtype is F32:
        return floats.fma_f32(a, b, acc)
    if dtype is F64:
        return floats.fma_f64(a, b, acc)
    return (acc + a * b).astype(dtype.numpy)  # integers wrap


def finish(acc: np.ndarray, result: DType) -> np.ndarray:
    if result in (F16, BF16):
        return floats.round_from_f32(acc, result)
    return integers.wrap(acc, result) if result.is_integer else acc.astype(result.numpy)


def _dot(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    lhs, rhs = np.asarray(operands[0]), np.asarray(operands[1])
    result = instruction.array_shape
    acc_type = accumulation_type(result.dtype)
    lhs = convert(lhs, instruction.operands[0].array_shape.dtype, acc_type)
    rhs = convert(rhs, instruction.operands[1].array_shape.dtype, acc_type)
    lb, rb = instruction.attrs.get("lhs_batch_dims", ()), instruction.attrs.get("rhs_batch_dims", ())
    lc, rc = instruction.attrs.get("lhs_contracting_dims", ()), instruction.attrs.get("rhs_contracting_dims", ())
    assert isinstance(lb, tuple) and isinstance(rb, tuple) and isinstance(lc, tuple) and isinstance(rc, tuple)
    lhs_free = [d for d in range(lhs.ndim) if d not in lb + lc]
    rhs_free = [d for d in range(rhs.ndim) if d not in rb + rc]
    batch = int(np.prod([lhs.shape[d] for d in lb], dtype=np.int64))
    m = int(np.prod([lhs.shape[d] for d in lhs_free], dtype=np.int64))
    n = int(np.prod([rhs.shape[d] for d in rhs_free], dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    # The contraction index runs row-major over the contracting dimensions in the order the
    # instruction lists them.
    a = np.transpose(lhs, list(lb) + lhs_free + list(lc)).reshape(batch, m, k)
    b = np.transpose(rhs, list(rb) + list(rc) + rhs_free).reshape(batch, k, n)
    if acc_type.is_complex:
        return _complex_chains(a, b, acc_type).reshape(result.dims)
    acc = np.zeros((batch, m, n), dtype=acc_type.numpy)
    for index in range(k):
        acc = multiply_add(a[:, :, index, None], b[:, None, index, :], acc, acc_type)
    return finish(acc, result.dtype).reshape(result.dims)


def _complex_chains(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    """A complex dot of [batch, m, k] by [batch, k, n]: two fma chains in the component type
    from +0, in contraction order; per step re += ar*br, re += (-ai)*bi, im += ar*bi,
    im += ai*br, each one fma."""
    component = dtype.component
    (ar, ai), (br, bi) = complexes.parts(a), complexes.parts(b)
    real = np.zeros((a.shape[0], a.shape[1], b.shape[2]), component.numpy)
    imag = np.zeros_like(real)
    for index in range(a.shape[2]):
        lr, li = ar[:, :, index, None], ai[:, :, index, None]
        rr, ri = br[:, None, index, :], bi[:, None, index, :]
        real = multiply_add(lr, rr, real, component)
        real = multiply_add(-li, ri, real, component)
        imag = multiply_add(lr, ri, imag, component)
        imag = multiply_add(li, rr, imag, component)
    return complexes.make(real, imag, dtype)


def _convolution(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """The input is padded and base-dilated with +0; every window position (row-major over the
    spatial dimensions in dim_labels order) and, within it, every input feature of the group
    (increasing) contributes one fma, padding positions included."""
    labels = instruction.attrs["dim_labels"]
    assert isinstance(labels, attr.ConvDimLabels)
    window = instruction.attrs.get("window", attr.Window(()))
    assert isinstance(window, attr.Window)
    groups = int(instruction.attrs.get("feature_group_count", 1))  # type: ignore[arg-type]
    batch_groups = int(instruction.attrs.get("batch_group_count", 1))  # type: ignore[arg-type]
    result = instruction.array_shape
    acc_type = accumulation_type(result.dtype)
    lhs = convert(np.asarray(operands[0]), instruction.operands[0].array_shape.dtype, acc_type)
    rhs = convert(np.asarray(operands[1]), instruction.operands[1].array_shape.dtype, acc_type)
    # Canonical layouts: input (B, C, spatial...), kernel (O, I, spatial...).
    x = np.transpose(lhs, (labels.input_batch, labels.input_feature) + labels.input_spatial)
    w = np.transpose(rhs, (labels.kernel_output_feature, labels.kernel_input_feature) + labels.kernel_spatial)
    for axis, wd in enumerate(window.dims):
        if wd.reversal:
            w = np.flip(w, axis=2 + axis)
    zero = np.zeros((), dtype=x.dtype)
    config = (attr.PadDim(0, 0), attr.PadDim(0, 0)) + tuple(
        attr.PadDim(wd.pad_low, wd.pad_high, wd.base_dilation - 1) for wd in window.dims
    )
    x = pad_array(x, zero, config)
    batch, out_features = x.shape[0] // batch_groups, w.shape[0]
    group_in = w.shape[1]
    out_spatial = tuple(result.dims[d] for d in labels.output_spatial)
    # Which input feature and batch slice feed output feature o.
    per_group = out_features // groups
    per_batch_group = out_features // batch_groups
    feature_base = (np.arange(out_features) // per_group) * group_in
    batch_base = (np.arange(out_features) // per_batch_group) * batch
    batch_index = np.arange(batch)[:, None] + batch_base[None, :]  # (B, O)
    acc = np.zeros((batch, out_features) + out_spatial, dtype=acc_type.numpy)
    spatial_sizes = tuple(wd.size for wd in window.dims)
    for position in np.ndindex(*spatial_sizes):
        index = tuple(
            slice(p * wd.window_dilation, p * wd.window_dilation + (n - 1) * wd.stride + 1, wd.stride)
            for p, wd, n in zip(position, window.dims, out_spatial, strict=True)
        )
        if 0 in out_spatial:
            break
        window_values = x[(slice(None), slice(None)) + index]  # (B*bg, C, out_spatial...)
        for feature in range(group_in):
            inputs = window_values[batch_index, (feature_base + feature)[None, :]]  # (B, O, out...)
            weights = w[(slice(None), feature) + position].reshape((1, out_features) + (1,) * len(out_spatial))
            acc = multiply_add(inputs, weights, acc, acc_type)
    acc = finish(acc, result.dtype)
    # Back to the output's dimension order.
    logical = (labels.output_batch, labels.output_feature) + labels.output_spatial
    return np.require(np.transpose(acc, np.argsort(logical)), requirements="C")


HANDLERS = family_table("dot_conv", globals())
