"""Call inlining: every `call` instruction is replaced by a copy of the computation it calls.

Only `call` is inlined; `fusion`, `while`, `conditional`, `map`, `reduce`, ... keep their
computations. Callees are processed before their callers (the module's reachable order), so
a caller inlines a callee that has no calls left. Computations no longer reachable from the
entry are dropped afterwards. The copy's instructions go right before the call, in the
callee's order, with fresh names from the module's NameAllocator (deterministic by creation
order).
"""

from __future__ import annotations

from compiler.hlo.editing import (
    NameAllocator,
    clone_computation,
    remove_unreachable_computations,
    replace_all_uses,
)
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.passes.base import SimplePass


def called_computation(instruction: Instruction) -> Computation:
    """The computation a `call` instruction calls (`to_apply`, or `calls` in some dialects)."""
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation), f"%{instruction.name} calls no computation"
    return callee


def inline_call(computation: Computation, call: Instruction, names: NameAllocator) -> None:
    """Replaces `call` (an instruction of `computation`) by a copy of its callee's body."""
    callee = called_computation(call)
    copy, mapping = clone_computation(callee, names)
    # Parameters of the copy stand for the call's operands.
    replacement: dict[int, Instruction] = {}
    for parameter in callee.parameters:
        assert parameter.parameter_number is not None
        replacement[id(mapping[id(parameter)])] = call.operands[parameter.parameter_number]
    body = [i for i in copy.instructions if i.opcode != "parameter"]
    for instruction in body:
        instruction.operands = [replacement.get(id(op), op) for op in instruction.operands]
        computation.instructions.insert(computation.instructions.index(call), instruction)
    result = replacement.get(id(copy.root), copy.root)
    replace_all_uses(computation, call, result)
    computation.instructions = [i for i in computation.instructions if i is not call]


class CallInlining(SimplePass):
    """Inlines every `call`, then drops unreachable computations."""

    name = "call-inlining"
    version = 1

    def run(self, module: Module) -> bool:
        """Inlines all calls in every reachable computation; returns whether any was."""
        names = NameAllocator(module)
        changed = False
        for computation in module.reachable_computations():
            calls = [i for i in computation.instructions if i.opcode == "call"]
            for call in calls:
                inline_call(computation, call, names)
                changed = True
        if changed:
            remove_unreachable_computations(module)
        return changed
