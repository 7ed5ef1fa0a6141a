"""batch-norm-training, batch-norm-inference and batch-norm-grad: their expansion
(compiler/hlo/batch_norm.py) lowered as a called computation, so the kernels are those of
its elementwise ops and reduces, the same bits as the reference's evaluation of it."""

from __future__ import annotations

from compiler.codegen import plan as P
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo.batch_norm import expansion
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.opcodes import family_opcodes


def _emit_batch_norm(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    inner, result = lowering.lower_computation(expansion(instruction), operands)
    steps.extend(inner)
    return result


EMITTERS = family_table("batch_norm", {}, shared=dict.fromkeys(family_opcodes("batch_norm"), _emit_batch_norm))
