"""Call inlining: every `call` instruction is replaced by a copy of the computation it calls.

Only `call` is inlined; `fusion`, `while`, `conditional`, `map`, `reduce`, ... keep their
computations. Callees are processed before their callers (the module's reachable order), so
a caller inlines a callee that has no calls left. Computations no longer reachable from the
entry are dropped afterwards. The copy's instructions take the call's place in the list, in
the callee's order, with fresh names from the module's NameAllocator (deterministic by
creation order).
"""

from __future__ import annotations

from compiler.hlo.editing import (
    NameAllocator,
    clone_computation,
    remove_unreachable_computations,
)
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.source_info import under_call
from compiler.passes.base import SimplePass


def called_computation(instruction: Instruction) -> Computation:
    """The computation a `call` instruction calls (`to_apply`, or `calls` in some dialects)."""
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation), f"%{instruction.name} calls no computation"
    return callee


def inline_calls(computation: Computation, names: NameAllocator) -> bool:
    """Replaces every `call` of `computation` by a copy of its callee's body, listed where the
    call was. One sweep over the instructions: uses of a call (and of a copied parameter)
    are redirected at the end, so the cost is linear in the size of the result."""
    if not any(i.opcode == "call" for i in computation.instructions):
        return False
    # A call or a copied parameter -> what it stands for. The keys' objects are kept alive
    # with the entries: a copied parameter is dropped from the list, and a freed object's id
    # could be given to an instruction created later, which would then be redirected.
    forward: dict[int, tuple[Instruction, Instruction]] = {}
    instructions: list[Instruction] = []
    for instruction in computation.instructions:
        if instruction.opcode != "call":
            instructions.append(instruction)
            continue
        callee = called_computation(instruction)
        copy, mapping = clone_computation(callee, names)
        for parameter in callee.parameters:
            assert parameter.parameter_number is not None
            copied = mapping[id(parameter)]
            forward[id(copied)] = (copied, instruction.operands[parameter.parameter_number])
        for copied in copy.instructions:
            if copied.opcode != "parameter":
                copied.location = under_call(copied.location, instruction.location)
                instructions.append(copied)
        forward[id(instruction)] = (instruction, copy.root)

    def resolve(value: Instruction) -> Instruction:
        while id(value) in forward:
            value = forward[id(value)][1]
        return value

    for instruction in instructions:
        instruction.operands = [resolve(op) for op in instruction.operands]
    computation.instructions = instructions
    computation.root = resolve(computation.root)
    return True


class CallInlining(SimplePass, name="call-inlining", version=2):
    """Inlines every `call`, then drops unreachable computations."""

    def run(self, module: Module) -> bool:
        """Inlines all calls in every reachable computation; returns whether any was."""
        names = NameAllocator(module)
        changed = False
        for computation in module.reachable_computations():
            changed |= inline_calls(computation, names)
        if changed:
            remove_unreachable_computations(module)
        return changed
