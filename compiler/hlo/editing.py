"""Editing the IR in place: the operations passes share (users, replacing uses, adding and
removing instructions, cloning computations, fresh names). Every helper keeps the order of
instructions deterministic: new instructions go right before their first user."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from compiler.hlo.ir import Computation, Instruction, Module


def users(computation: Computation) -> dict[int, list[Instruction]]:
    """For each instruction (by id), the instructions using it, in instruction order; an
    instruction used twice by one user is listed once."""
    result: dict[int, list[Instruction]] = {id(i): [] for i in computation.instructions}
    for instruction in computation.instructions:
        seen: set[int] = set()
        for operand in instruction.operands:
            if id(operand) not in seen:
                seen.add(id(operand))
                result.setdefault(id(operand), []).append(instruction)
    return result


def replace_all_uses(computation: Computation, old: Instruction, new: Instruction) -> None:
    """Every use of `old` in `computation` (and the root) becomes `new`."""
    for instruction in computation.instructions:
        if instruction is new:
            continue
        instruction.operands = [new if op is old else op for op in instruction.operands]
    if computation.root is old:
        computation.root = new


def replace_instruction(computation: Computation, old: Instruction, new: Instruction) -> None:
    """`new` takes `old`'s place in the instruction list and every use of `old`."""
    position = next(n for n, existing in enumerate(computation.instructions) if existing is old)
    computation.instructions[position] = new
    replace_all_uses(computation, old, new)


def add_computation_before(module: Module, computation: Computation, added: Computation) -> None:
    """Adds `added` to the module, listed just before `computation` (callees before callers)."""
    index = next(n for n, existing in enumerate(module.computations) if existing is computation)
    module.computations.insert(index, added)


def insert_before(computation: Computation, instruction: Instruction, anchor: Instruction) -> None:
    """Adds `instruction` to the computation, listed just before `anchor`."""
    position = next(i for i, existing in enumerate(computation.instructions) if existing is anchor)
    computation.instructions.insert(position, instruction)


def remove_dead(computation: Computation) -> bool:
    """Drops instructions the root does not depend on (parameters stay). True if any went."""
    live = {id(i) for i in computation.post_order()}
    kept = [i for i in computation.instructions if id(i) in live or i.opcode == "parameter"]
    changed = len(kept) != len(computation.instructions)
    computation.instructions = kept
    return changed


def remove_unreachable_computations(module: Module) -> bool:
    """Drops computations the entry does not (transitively) call."""
    reachable = {id(c) for c in module.reachable_computations()}
    kept = [c for c in module.computations if id(c) in reachable]
    changed = len(kept) != len(module.computations)
    module.computations = kept
    return changed


class NameAllocator:
    """Fresh instruction and computation names for a module, deterministic by creation order."""

    def __init__(self, module: Module) -> None:
        self.taken = {c.name for c in module.computations}
        for computation in module.computations:
            self.taken.update(i.name for i in computation.instructions)
        self.counters: dict[str, int] = {}

    def fresh(self, hint: str) -> str:
        base = hint.split(".")[0] or "v"
        while True:
            count = self.counters.get(base, 0) + 1
            self.counters[base] = count
            name = f"{base}.{count}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def clone_computation(computation: Computation, names: NameAllocator, name: str | None = None) -> tuple[Computation, dict[int, Instruction]]:
    """A deep copy of `computation` with fresh names (called computations are shared).
    Returns the copy and the map from old instruction ids to the copies."""
    mapping: dict[int, Instruction] = {}
    cloned: list[Instruction] = []
    for instruction in computation.instructions:
        twin = copy.copy(instruction)
        twin.name = names.fresh(instruction.name)
        twin.attrs = dict(instruction.attrs)
        twin.ignored_attrs = dict(instruction.ignored_attrs)
        mapping[id(instruction)] = twin
        cloned.append(twin)
    for twin in cloned:
        twin.operands = [mapping[id(op)] for op in twin.operands]
    result = Computation(name or names.fresh(computation.name), cloned, mapping[id(computation.root)], computation.location)
    return result, mapping


def bind_parameters(
    copy: Computation, bindings: Sequence[tuple[Instruction, Instruction]]
) -> tuple[list[Instruction], Instruction]:
    """Splices a fresh clone (`clone_computation`) into another computation: each of the
    clone's parameters in `bindings` is replaced by its value there. Returns the clone's
    other instructions in post order, rewired, and what its root stands for."""
    bound = {id(parameter): value for parameter, value in bindings}
    body = []
    for instruction in copy.post_order():
        if instruction.opcode == "parameter":
            continue
        instruction.operands = [bound.get(id(op), op) for op in instruction.operands]
        body.append(instruction)
    return body, bound.get(id(copy.root), copy.root)


def install_fusion(
    module: Module,
    computation: Computation,
    replaced: Instruction,
    kind: str,
    called_name: str,
    arguments: list[Instruction],
    parameters: list[Instruction],
    body: list[Instruction],
    root: Instruction,
    names: NameAllocator,
) -> Instruction:
    """A `kind` fusion of `arguments`, calling a new computation of `parameters` + `body`
    rooted at `root`, takes `replaced`'s place (and shape); the computation joins the module
    before `computation`."""
    called = Computation(names.fresh(called_name), parameters + body, root, computation.location)
    fusion = Instruction(names.fresh("fusion"), "fusion", replaced.shape, arguments, {"kind": kind, "calls": called},
                         location=replaced.location)  # fmt: skip
    replace_instruction(computation, replaced, fusion)
    add_computation_before(module, computation, called)
    return fusion


def all_instructions(module: Module) -> Iterable[tuple[Computation, Instruction]]:
    for computation in module.computations:
        for instruction in computation.instructions:
            yield computation, instruction
