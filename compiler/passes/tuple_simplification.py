"""Tuple simplification.

- `get-tuple-element(tuple(a0, ..., an), i)` becomes `ai`;
- `tuple(get-tuple-element(x, 0), ..., get-tuple-element(x, n-1))` of an n-element `x`
  becomes `x`.

Both only move references to values, so results are bit-identical. A replacement happens
only when the two shapes are equal including layouts, so no instruction changes the shape
it is seen with (layouts matter to `bitcast`, and the entry's result shape stays as
declared). The entry root is never replaced by the second rule: the entry's result stays the
tuple it was, which keeps outputs distinct from the parameters' buffers.
"""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.shape import TupleShape
from compiler.passes.base import ComputationPass
from compiler.passes.forwarding import Forwarding


def _forwarded(instruction: Instruction) -> Instruction | None:
    """The existing value `instruction` can be replaced with, if any."""
    if instruction.opcode == "get-tuple-element":
        source = instruction.operands[0]
        if source.opcode == "tuple":
            element = source.operands[int(instruction.attrs["index"])]  # type: ignore[call-overload]
            if element.shape == instruction.shape:
                return element
        return None
    if instruction.opcode == "tuple" and instruction.operands:
        first = instruction.operands[0]
        if first.opcode != "get-tuple-element":
            return None
        source = first.operands[0]
        if not isinstance(source.shape, TupleShape) or len(source.shape.elements) != len(
            instruction.operands
        ):
            return None
        for index, operand in enumerate(instruction.operands):
            if (
                operand.opcode != "get-tuple-element"
                or operand.operands[0] is not source
                or operand.attrs["index"] != index
            ):
                return None
        if source.shape == instruction.shape:
            return source
    return None


def simplify_tuples(computation: Computation, is_entry: bool) -> bool:
    """Applies both rules to one computation, in post order (so chains collapse at once)."""
    forwarding = Forwarding(computation)
    for instruction in computation.post_order():
        forwarding.visit(instruction)
        if is_entry and instruction is computation.root and instruction.opcode == "tuple":
            continue
        replacement = _forwarded(instruction)
        if replacement is not None:
            forwarding.replace(instruction, replacement)
    return forwarding.finish()


class TupleSimplification(ComputationPass, name="tuple-simplification", version=2):
    """Forwards tuple elements past tuple/get-tuple-element pairs; dead tuples are left to
    dead code elimination."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        return simplify_tuples(computation, computation is module.entry)
