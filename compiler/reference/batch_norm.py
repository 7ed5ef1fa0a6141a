"""batch-norm-training, batch-norm-inference and batch-norm-grad: the evaluation of their
expansion (compiler/hlo/batch_norm.py), XLA's sequence of elementwise ops and reduces, so the
ops mean exactly what the rest of the contract makes of that sequence."""

from __future__ import annotations

from compiler.hlo.batch_norm import expansion
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.opcodes import family_opcodes
from compiler.reference.evaluator import Evaluator, Value


def _batch_norm(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return evaluator.evaluate_computation(expansion(instruction), operands)


HANDLERS = family_table("batch_norm", {}, shared=dict.fromkeys(family_opcodes("batch_norm"), _batch_norm))
