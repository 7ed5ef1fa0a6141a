"""Scheduling: a deterministic topological order of each computation that keeps the bytes of
live values low.

Two candidates are built and the one with the lower estimated peak of live bytes is kept (the
post order on a tie): the post order (depth first from the root, good on chains) and a
greedy list schedule. At every step the greedy scheduler takes, among the instructions whose operands have all run, the
one that frees the most bytes (operands whose last use it is) net of the bytes it allocates;
ties go to the earliest instruction of the post order. Instructions that allocate nothing
(parameters, constants, tuples, get-tuple-element, copy) run as soon as they are ready.
"""

from __future__ import annotations

from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import ALIASING, OPERAND_ALIASING
from compiler.hlo.shape import flatten
from compiler.passes.base import ComputationPass


def value_bytes(instruction: Instruction) -> int:
    """Bytes of new storage an instruction's value needs."""
    if instruction.opcode in ALIASING:
        return 0
    return sum(s.byte_size for s in flatten(instruction.shape))


def storage_owners(instruction: Instruction, cache: dict[int, list[Instruction]]) -> list[Instruction]:
    """The instructions whose buffers hold this value (itself, or what it aliases)."""
    key = id(instruction)
    if key not in cache:
        if instruction.opcode in OPERAND_ALIASING:
            owners: list[Instruction] = []
            for operand in instruction.operands:
                for owner in storage_owners(operand, cache):
                    if all(owner is not o for o in owners):
                        owners.append(owner)
            cache[key] = owners
        else:
            cache[key] = [instruction]
    return cache[key]


def schedule(computation: Computation) -> list[Instruction]:
    """The memory-lowering order of the instructions the root depends on: the greedy list
    schedule or the post order, whichever has the lower estimated peak (the post order on a
    tie). The greedy choice is myopic, and a depth-first order is often better on chains."""
    post_order = computation.post_order()
    greedy = greedy_schedule(computation)
    if estimated_peak(greedy, computation.root) < estimated_peak(post_order, computation.root):
        return greedy
    return post_order


def estimated_peak(order: list[Instruction], root: Instruction) -> int:
    """The largest sum of live value bytes over the steps of `order` (a value is live from
    the instruction that makes it to its last reader; the root's storage to the end)."""
    owners_cache: dict[int, list[Instruction]] = {}
    last_read: dict[int, int] = {}
    for index, instruction in enumerate(order):
        for operand in instruction.operands:
            for owner in storage_owners(operand, owners_cache):
                last_read[id(owner)] = index
    for owner in storage_owners(root, owners_cache):
        last_read[id(owner)] = len(order)
    live = 0
    peak = 0
    dying: dict[int, int] = {}
    for index, instruction in enumerate(order):
        size = value_bytes(instruction)
        live += size
        peak = max(peak, live)
        dying[last_read.get(id(instruction), index)] = dying.get(last_read.get(id(instruction), index), 0) + size
        live -= dying.pop(index, 0)
    return peak


def greedy_schedule(computation: Computation) -> list[Instruction]:
    """The greedy list schedule (see the module docstring)."""
    order = computation.post_order()
    position = {id(i): n for n, i in enumerate(order)}
    owners_cache: dict[int, list[Instruction]] = {}
    # For every owning value, how many instructions still have to read it.
    pending_reads: dict[int, int] = {}
    readers: dict[int, list[Instruction]] = {id(i): [] for i in order}
    for instruction in order:
        for operand in _unique(instruction.operands):
            readers[id(operand)].append(instruction)
            for owner in storage_owners(operand, owners_cache):
                pending_reads[id(owner)] = pending_reads.get(id(owner), 0) + 1
    for owner in storage_owners(computation.root, owners_cache):
        pending_reads[id(owner)] = pending_reads.get(id(owner), 0) + 1  # outputs stay live
    waiting = {id(i): len(_unique(i.operands)) for i in order}
    ready = [i for i in order if waiting[id(i)] == 0]
    result: list[Instruction] = []
    while ready:
        chosen = min(ready, key=lambda i: (-_benefit(i, pending_reads, owners_cache), position[id(i)]))
        ready.remove(chosen)
        result.append(chosen)
        for operand in _unique(chosen.operands):
            for owner in storage_owners(operand, owners_cache):
                pending_reads[id(owner)] -= 1
        for reader in readers[id(chosen)]:
            waiting[id(reader)] -= 1
            if waiting[id(reader)] == 0:
                ready.append(reader)
    assert len(result) == len(order), "schedule lost instructions"
    return result


def _unique(instructions: list[Instruction]) -> list[Instruction]:
    seen: list[Instruction] = []
    for instruction in instructions:
        if all(instruction is not s for s in seen):
            seen.append(instruction)
    return seen


def _benefit(instruction: Instruction, pending_reads: dict[int, int], cache: dict[int, list[Instruction]]) -> int:
    if instruction.opcode in ALIASING:
        return 1 << 62  # free to run: it allocates nothing
    freed = 0
    counted: list[Instruction] = []
    for operand in _unique(instruction.operands):
        for owner in storage_owners(operand, cache):
            if any(owner is c for c in counted):
                continue
            counted.append(owner)
            reads_here = sum(1 for op in _unique(instruction.operands) if any(owner is o for o in storage_owners(op, cache)))
            if pending_reads.get(id(owner), 0) == reads_here:
                freed += value_bytes(owner)
    return freed - value_bytes(instruction)


class Scheduling(ComputationPass, name="scheduling", version=2):
    """Fixes the execution order of every computation (see the module docstring)."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        ordered = schedule(computation)
        live = {id(i) for i in ordered}
        rest = [i for i in computation.instructions if id(i) not in live]
        new_order = ordered + rest
        changed = not computation.scheduled or any(a is not b for a, b in zip(new_order, computation.instructions, strict=True))
        computation.instructions = new_order
        computation.scheduled = True
        return changed
