"""Constant folding: an instruction whose operands are all constants becomes a constant.

The value is computed by the reference evaluator's handler for the opcode (the executable
numerics contract), never by numpy's own arithmetic, so the folded constant holds exactly
the bits the op would produce at run time.

Not folded:
- `while`, `conditional`, `call`, `fusion` (control flow and calls: inlining handles calls),
  `parameter`, `constant`, `tuple`, `get-tuple-element` (not array values of their own) and
  anything random or side-effecting (rejected by the frontend anyway);
- `broadcast` and `iota`: a broadcast constant is the same value with more elements, and
  an iota needs no memory at all, so folding only inflates the module;
- results of more than MAX_ELEMENTS elements, results with more elements than all operands
  together (e.g. a large `pad` of a small constant), and ops reading more than MAX_ELEMENTS
  operand elements (the reference evaluator is slow);
- results holding a NaN with a payload or a sign (possible only through `bitcast-convert`,
  or data movement of such a value): HLO text cannot spell such a literal (`nan` always
  reads back as the canonical NaN), so the canonical text would no longer describe the
  module.
"""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import NOT_FOLDED
from compiler.hlo.shape import ArrayShape
from compiler.numerics.floats import canonicalize_nans, check_fp_environment
from compiler.passes.base import SimplePass
from compiler.reference import HANDLERS
from compiler.reference.evaluator import Evaluator

MAX_ELEMENTS = 65536



def folded_value(instruction: Instruction, evaluator: Evaluator) -> np.ndarray | None:
    """The constant value of `instruction` if it can and should be folded, else None."""
    if instruction.opcode in NOT_FOLDED or instruction.opcode not in HANDLERS:
        return None
    shape = instruction.shape
    if not isinstance(shape, ArrayShape) or not instruction.operands:
        return None
    if any(op.opcode != "constant" or op.literal is None for op in instruction.operands):
        return None
    operand_elements = sum(op.literal.size for op in instruction.operands)  # type: ignore[union-attr]
    if operand_elements > MAX_ELEMENTS or shape.element_count > MAX_ELEMENTS:
        return None
    if shape.element_count > max(operand_elements, 1):
        return None
    operands = [op.literal for op in instruction.operands]
    with np.errstate(all="ignore"):
        value = evaluator.evaluate_instruction(instruction, operands)  # type: ignore[arg-type]
    if isinstance(value, tuple):
        return None
    value = np.asarray(value)
    # The handlers return the exact element type; anything else is not trusted.
    if value.dtype != shape.dtype.numpy or tuple(value.shape) != shape.dims:
        return None
    value = np.require(value, requirements="C").copy()
    parts = value.reshape(-1).view(shape.dtype.component.numpy) if shape.dtype.is_complex else value
    part_type = shape.dtype.component if shape.dtype.is_complex else shape.dtype
    if part_type.is_float and canonicalize_nans(parts, part_type).tobytes() != parts.tobytes():
        return None
    return value


def fold_constants(computation: Computation, evaluator: Evaluator) -> bool:
    """Folds in post order, so chains of constant ops fold in one run."""
    changed = False
    for instruction in computation.post_order():
        value = folded_value(instruction, evaluator)
        if value is None:
            continue
        # The instruction becomes the constant in place: its name, position and users stay.
        instruction.opcode = "constant"
        instruction.operands = []
        instruction.attrs = {}
        instruction.ignored_attrs = {}
        instruction.literal = value
        changed = True
    return changed


class ConstantFolding(SimplePass, name="constant-folding", version=1):
    """Evaluates instructions of constants with the reference evaluator."""

    def options(self) -> dict:
        return {"max_elements": MAX_ELEMENTS}

    def run(self, module: Module) -> bool:
        """Folds every foldable instruction; returns whether any was."""
        check_fp_environment()  # the reference arithmetic needs round-to-nearest with subnormals
        evaluator = Evaluator(HANDLERS)
        changed = False
        for computation in module.computations:
            changed |= fold_constants(computation, evaluator)
        return changed
