"""Kernels deduplicated before they are generated: an instruction lowered like an earlier one
is not emitted again.

Models repeat themselves (twelve identical layers, a forward and a backward pass of the same
shapes), and building a kernel's IR in Python, then printing it, is most of a lowering's
time. Two instructions whose emission is the same function of the same things make the same
kernels: same opcode, shapes, attributes, decisions and called computations (compared by
their structure, not their names), and operand buffers of the same kinds, types and sizes,
passed in the same pattern (an operand given twice is one slot, not two). The second
instruction then gets the first one's emission with its own buffers (`Emission.replay`):
fresh arena buffers of the same sizes, its steps calling the kernels the first made, slot for
slot, and the same in-place proposals.

What is made is exactly what emitting again would make, kernel text dropped as a duplicate
(kernel.py) included: the names a second emission would have used are taken from the same
counter, so every later name, the IR and the plan are the same bytes
(tests/codegen/test_kernel_reuse.py holds them equal on the fixtures that repeat layers and those
with loops and branches). A step is labelled
with the instruction or with one inside a computation it calls (a dot's steps in an output
fusion carry the dot's name); the replay labels it with the instruction at the same place in
the new instruction, whose structure is the same. An emission that did anything else (a
constant or input buffer, a step other than a kernel or a copy, a label outside the
instruction, a buffer it was not given and did not make) is never replayed; neither is anything inside a while body,
where what runs before the loop depends on the operands' invariance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from compiler.codegen import plan as P
from compiler.codegen.kernel import KernelModule
from compiler.codegen.plan import Ref
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.printer import canonical_names, instruction_text


class LoweringState(Protocol):
    """What recording and replaying an emission reads and changes of a module's lowering
    (compiler/codegen/lower.py Lowering, which calls this module)."""

    kernels: KernelModule
    buffers: list[P.Buffer]
    arena_bytes: int
    in_place: list[tuple[int, int]]

    def buffer(self, buffer_id: int) -> P.Buffer: ...

    def new_buffer_like(self, buffer: P.Buffer) -> int: ...

    @property
    def in_loop(self) -> bool: ...

# Opcodes whose lowering is not a kernel emission of their own (parameters are bound, control
# flow lowers computations, constants carry data).
NEVER_REPLAYED = frozenset({"parameter", "constant", "while", "conditional", "call"})


class Structure:
    """The structural text of instructions and computations (names never enter it), each
    computation's computed once."""

    def __init__(self) -> None:
        self._computations: dict[int, str] = {}

    def computation(self, computation: Computation) -> str:
        key = id(computation)
        if key not in self._computations:
            names = canonical_names(computation)
            lines = []
            for instruction in computation.execution_order():
                root = "ROOT " if instruction is computation.root else ""
                lines.append(f"{root}{names[id(instruction)]} = {self.instruction(instruction, lambda op: names[id(op)])}")
            self._computations[key] = "{" + "; ".join(lines) + "}"
        return self._computations[key]

    def instruction(self, instruction: Instruction, operand: Callable[[Instruction], str] = lambda op: str(op.shape)) -> str:
        """Its text with each operand named by `operand` (by default, its shape), and the
        passes' decisions."""
        return instruction_text(instruction, operand, self.computation) + f" {instruction.decisions!r}"


def _ref_shape(ref: Ref) -> object:
    return tuple(_ref_shape(r) for r in ref) if isinstance(ref, tuple) else None


def _flat(ref: Ref) -> list[int]:
    return [b for r in ref for b in _flat(r)] if isinstance(ref, tuple) else [ref]


def emission_key(lowering: LoweringState, structure: Structure, instruction: Instruction, operands: list[Ref]) -> tuple | None:
    """What decides `instruction`'s emission with these operand buffers; None when it is
    never replayed."""
    if instruction.opcode in NEVER_REPLAYED or lowering.in_loop:
        return None
    flat = _flat(tuple(operands))
    buffers = []
    for buffer_id in flat:
        buffer = lowering.buffer(buffer_id)
        # A constant's bytes may be read by an emitter: only the same constant is the same.
        identity = buffer.id if buffer.kind == "constant" else None
        buffers.append((buffer.kind, buffer.dtype, buffer.dims, buffer.nbytes, identity, flat.index(buffer_id)))
    return (structure.instruction(instruction), _ref_shape(tuple(operands)), tuple(buffers))


@dataclass(frozen=True)
class Emission:
    """What lowering one instruction added to the lowering, in terms of its operand buffers
    (`operands`) and the buffers it made (ids `first_buffer` on, `made`)."""

    operands: tuple[int, ...]
    first_buffer: int
    made: tuple[P.Buffer, ...]
    kernels: tuple[str, ...]  # the kernel names it took, in order
    steps: tuple[P.Step, ...]
    labels: tuple[int, ...]  # each kernel step's label, as its place in `labelled_names`
    in_place: tuple[tuple[int, int], ...]
    result: Ref

    def replay(self, lowering: LoweringState, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
        """The same emission for `instruction` with `operands`: its steps appended to `steps`."""
        mapping = dict(zip(self.operands, _flat(tuple(operands)), strict=True))
        for offset, buffer in enumerate(self.made):
            new = lowering.new_buffer_like(buffer)
            mapping[self.first_buffer + offset] = new
        kernels = lowering.kernels
        names = {}
        for name in self.kernels:
            names[name] = new_name = kernels.unique(name.rsplit("_", 1)[0])
            kernels.kernel_aliases[new_name] = kernels.kernel_of(name)
            kernels.kernel_buffers[new_name] = tuple(mapping[b] for b in kernels.kernel_buffers[name])
        labels = iter(self.labels)
        inside = labelled_names(instruction)
        for step in self.steps:
            if isinstance(step, P.KernelStep):
                steps.append(dataclasses.replace(step, kernel=names[step.kernel], instruction=inside[next(labels)]))
            else:
                assert isinstance(step, P.CopyStep)
                steps.append(P.CopyStep(tuple(mapping[b] for b in step.sources), tuple(mapping[b] for b in step.targets)))
        lowering.in_place.extend((mapping[a], mapping[b]) for a, b in self.in_place)
        return _remap(self.result, mapping)


def labelled_names(instruction: Instruction) -> list[str]:
    """The names a step of `instruction`'s emission may carry, in a fixed order: its own, then
    those of the instructions in the computations it calls, depth first."""
    names = [instruction.name]
    for computation in instruction.called_computations():
        for inner in computation.execution_order():
            names.extend(labelled_names(inner))
    return names


def _remap(ref: Ref, mapping: dict[int, int]) -> Ref:
    return tuple(_remap(r, mapping) for r in ref) if isinstance(ref, tuple) else mapping[ref]


@dataclass(frozen=True)
class Mark:
    """The lowering's state before an instruction is emitted."""

    buffers: int
    arena_bytes: int
    counter: int
    kernel_names: int
    aliases: int
    steps: int
    in_place: int


def mark(lowering: LoweringState, steps: list[P.Step]) -> Mark:
    kernels = lowering.kernels
    return Mark(len(lowering.buffers), lowering.arena_bytes, kernels.counter, len(kernels.kernel_names), len(kernels.kernel_aliases), len(steps), len(lowering.in_place))


def recorded(lowering: LoweringState, before: Mark, instruction: Instruction, operands: list[Ref], steps: list[P.Step], result: Ref) -> Emission | None:
    """The emission made since `before`, or None when it cannot be replayed."""
    kernels = lowering.kernels
    made = tuple(lowering.buffers[before.buffers :])
    if any(b.kind != "arena" for b in made) or lowering.arena_bytes - before.arena_bytes != sum(P.aligned_size(b.nbytes) for b in made):
        return None
    taken = kernels.kernel_names[before.kernel_names :] + list(kernels.kernel_aliases)[before.aliases :]
    taken.sort(key=lambda name: int(name.rsplit("_", 1)[1]))
    if kernels.counter - before.counter != len(taken) or not all(name.startswith("k_") for name in taken):
        return None
    new_steps = tuple(steps[before.steps :])
    if not all(isinstance(s, (P.CopyStep, P.KernelStep)) for s in new_steps):
        return None
    inside = labelled_names(instruction)
    place = {name: k for k, name in enumerate(inside)}
    labels = [s.instruction for s in new_steps if isinstance(s, P.KernelStep)]
    if len(place) != len(inside) or not all(label in place for label in labels):
        return None  # a name given twice, or a step of another instruction's
    known = set(_flat(tuple(operands))) | {b.id for b in made}
    used = [b for name in taken for b in kernels.kernel_buffers[name]]
    used += [b for s in new_steps if isinstance(s, P.CopyStep) for b in (*s.sources, *s.targets)]
    in_place = tuple(lowering.in_place[before.in_place :])
    used += [b for pair in in_place for b in pair] + _flat(result if isinstance(result, tuple) else (result,))
    if not set(used) <= known:
        return None
    return Emission(tuple(_flat(tuple(operands))), before.buffers, made, tuple(taken), new_steps, tuple(place[label] for label in labels), in_place, result)
