"""Replacing values in one sweep: the simplification passes visit a computation in post order
and decide, instruction by instruction, that a value is to be replaced by another. Calling
`replace_all_uses` for each decision scans the whole computation every time (quadratic on
large modules); `Forwarding` records the decisions instead and rewrites each instruction's
operands when the sweep reaches it, which post order guarantees is after its operands'
decisions. `finish` rewrites the root."""

from __future__ import annotations

from collections.abc import Callable

from compiler.hlo.ir import Computation, Instruction


class Forwarding:
    """Pending replacements for one computation, applied during one post-order sweep."""

    def __init__(self, computation: Computation) -> None:
        self.computation = computation
        self.target: dict[int, Instruction] = {}

    def resolve(self, instruction: Instruction) -> Instruction:
        """What `instruction` stands for now (following chains of replacements)."""
        while id(instruction) in self.target:
            instruction = self.target[id(instruction)]
        return instruction

    def visit(self, instruction: Instruction) -> None:
        """Points `instruction`'s operands at their replacements; call it before looking at
        the instruction's operands."""
        if self.target and any(id(op) in self.target for op in instruction.operands):
            instruction.operands = [self.resolve(op) for op in instruction.operands]

    def replace(self, old: Instruction, new: Instruction) -> None:
        """Every later use of `old` (in this sweep) and the root become `new`."""
        self.target[id(old)] = self.resolve(new)

    def finish(self) -> bool:
        """Rewrites the root and every remaining use (instructions the sweep did not visit,
        which the root does not depend on); True if any replacement was recorded."""
        if not self.target:
            return False
        for instruction in self.computation.instructions:
            self.visit(instruction)
        self.computation.root = self.resolve(self.computation.root)
        return True


def rewrite_in_post_order(computation: Computation, rewrite: Callable[[Instruction], Instruction | bool]) -> bool:
    """One post-order sweep: `rewrite(instruction)` changes the instruction in place and says
    True (it is then asked again), names the instruction that replaces it (an Instruction:
    every later use follows), or says False (nothing to do). Returns whether anything changed."""
    changed = False
    forwarding = Forwarding(computation)
    for instruction in computation.post_order():
        forwarding.visit(instruction)
        while (outcome := rewrite(instruction)) is True:
            changed = True
        if isinstance(outcome, Instruction):
            forwarding.replace(instruction, outcome)
    return forwarding.finish() or changed
