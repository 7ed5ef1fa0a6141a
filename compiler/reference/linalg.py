"""cholesky and triangular-solve by the pinned algorithms of compiler/numerics/linalg.py:
the same loops and fma steps as the backend, vectorized over batches and right-hand sides
only (each element's sequence of operations is unchanged)."""

from __future__ import annotations

import numpy as np

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.narrow_linalg import NARROW, in_f32
from compiler.numerics import floats
from compiler.numerics.linalg import TriangularSystem
from compiler.reference.dot_conv import multiply_add  # the contract's one fma step
from compiler.reference.evaluator import Evaluator, Value


def _swap(matrix: np.ndarray) -> np.ndarray:
    return np.swapaxes(matrix, -1, -2)


def _cholesky(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    dtype = instruction.array_shape.dtype
    if dtype in NARROW:
        return evaluator.evaluate_computation(in_f32(instruction), operands)
    lower = bool(instruction.attrs.get("lower", False))
    a = np.asarray(operands[0]) if lower else _swap(np.asarray(operands[0]))
    n = a.shape[-1]
    factor = np.zeros(a.shape, dtype.numpy)
    for j in range(n):
        d = a[..., j, j].copy()
        for k in range(j):
            d = multiply_add(-factor[..., j, k], factor[..., j, k], d, dtype)
        diagonal = np.sqrt(d)
        factor[..., j, j] = diagonal
        s = a[..., j + 1 :, j].copy()
        for k in range(j):
            s = multiply_add(-factor[..., j + 1 :, k], factor[..., j, k, None], s, dtype)
        factor[..., j + 1 :, j] = s / diagonal[..., None]
    result = factor if lower else _swap(factor)
    return floats.canonicalize_nans(np.ascontiguousarray(result), dtype)


def _triangular_solve(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    dtype = instruction.array_shape.dtype
    if dtype in NARROW:
        return evaluator.evaluate_computation(in_f32(instruction), operands)
    attrs = instruction.attrs
    system = TriangularSystem.of(bool(attrs.get("left_side", False)), bool(attrs.get("lower", False)),
                                 str(attrs.get("transpose_a", "NO_TRANSPOSE")), bool(attrs.get("unit_diagonal", False)))  # fmt: skip
    a, b = np.asarray(operands[0]), np.asarray(operands[1])
    matrix = _swap(a) if system.matrix_transposed else a
    rhs = _swap(b) if system.vectors_are_rows else b  # [..., m, vectors]
    m = matrix.shape[-1]
    y = np.zeros(rhs.shape, dtype.numpy)
    order = range(m) if system.forward else range(m - 1, -1, -1)
    for i in order:
        s = rhs[..., i, :].copy()
        beside = range(i) if system.forward else range(i + 1, m)
        for k in beside:
            s = multiply_add(-matrix[..., i, k, None], y[..., k, :], s, dtype)
        y[..., i, :] = s if system.unit_diagonal else s / matrix[..., i, i, None]
    result = _swap(y) if system.vectors_are_rows else y
    return floats.canonicalize_nans(np.ascontiguousarray(result), dtype)


HANDLERS = family_table("linalg", globals())
