"""cholesky and triangular-solve of f16 and bf16 matrices (docs/numerics.md §7): the
operands converted to f32 (exactly), the pinned algorithm in f32, the result rounded to the
type once, as a dot of those types accumulates in f32 and rounds once. As an HLO
computation, which the reference evaluates and the backend lowers."""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.shape import ArrayShape
from core.dtypes import BF16, F16, F32

NARROW = (F16, BF16)


def in_f32(instruction: Instruction) -> Computation:
    """The computation that is `instruction` (an f16 or bf16 cholesky or triangular-solve)."""
    instructions: list[Instruction] = []
    widened: list[Instruction] = []
    for number, operand in enumerate(instruction.operands):
        parameter = Instruction(f"p{number}", "parameter", operand.shape, parameter_number=number)
        wide = Instruction(f"w{number}", "convert", ArrayShape.of(F32, operand.array_shape.dims), [parameter])
        instructions += [parameter, wide]
        widened.append(wide)
    solved = Instruction("in_f32", instruction.opcode, ArrayShape.of(F32, instruction.array_shape.dims), widened, dict(instruction.attrs))
    rounded = Instruction("rounded", "convert", instruction.array_shape, [solved])
    instructions += [solved, rounded]
    return Computation(f"{instruction.opcode}_in_f32", instructions, rounded)
