"""The shape rules of cholesky and triangular-solve."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import ShapeRule, array, check, operand_count
from compiler.numerics import linalg
from core.dtypes import BF16, F16, F32, F64


def _square_matrices(shape: ArrayShape, opcode: str) -> int:
    check(shape.dtype in (F16, BF16, F32, F64), f"{opcode} works on f16, bf16, f32 or f64 matrices, not {shape.dtype.name}")
    check(shape.rank >= 2 and shape.dims[-1] == shape.dims[-2], f"{opcode} needs square matrices in the last two dimensions, not {shape}")
    return shape.dims[-1]


def _cholesky(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    _square_matrices(operand, "cholesky")
    return ArrayShape.of(operand.dtype, operand.dims)


def _triangular_solve(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    a, b = array(instruction, 0), array(instruction, 1)
    m = _square_matrices(a, "triangular-solve")
    transpose = instruction.attrs.get("transpose_a", "NO_TRANSPOSE")
    check(transpose in linalg.TRANSPOSES, f"transpose_a={transpose} is not one of {', '.join(linalg.TRANSPOSES)}")
    check(b.dtype == a.dtype and b.rank == a.rank and b.dims[:-2] == a.dims[:-2], f"triangular-solve's b {b} does not match a {a}")
    left = bool(instruction.attrs.get("left_side", False))
    solved = b.dims[-2] if left else b.dims[-1]
    check(solved == m, f"triangular-solve with left_side={str(left).lower()} needs b's {'rows' if left else 'columns'} to number {m}, not {solved}")
    return ArrayShape.of(b.dtype, b.dims)


RULES: dict[str, ShapeRule] = family_table("linalg", globals())
