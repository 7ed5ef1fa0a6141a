"""The HLO intermediate representation: modules, computations and instructions.

Plain mutable objects: passes rewrite them in place. Instructions refer to their operands
directly; computations keep their instructions in a list, so every iteration order is the
order of that list, never the order of a set or of object ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.errors import CompilerError
from compiler.hlo.errors import SourceLocation
from compiler.hlo.shape import ArrayShape, Shape

# Attributes whose values name computations, in the order the printer lists them.
COMPUTATION_ATTRIBUTES = (
    "to_apply",
    "calls",
    "condition",
    "body",
    "true_computation",
    "false_computation",
    "branch_computations",
    "select",
    "scatter",
)


class CycleError(CompilerError, ValueError):
    """An instruction is (transitively) its own operand."""

    def __init__(self, instruction: Instruction) -> None:
        super().__init__(f"%{instruction.name} depends on itself")
        self.instruction = instruction


@dataclass(frozen=True)
class Decisions:
    """How the backend emits one instruction, as the passes decided it. An instruction
    without decisions (a module lowered without running the pass pipeline) is emitted the
    general way: a fusion inlined op by op, a reduce-window by its window loop."""

    # A fusion: the kind of the one kernel it is emitted as (kLoop, kInput, kOutput); None:
    # inlined op by op.
    fused_kernel: str | None = None
    # A reduce-window: the dimension it runs along as a scan; None: the window loop.
    running_dimension: int | None = None


@dataclass(eq=False)
class Instruction:
    """One HLO instruction. `attrs` holds typed attribute values (see attributes.py);
    computation-valued attributes hold `Computation` objects once the module is resolved."""

    name: str
    opcode: str
    shape: Shape
    operands: list[Instruction] = field(default_factory=list)
    attrs: dict[str, object] = field(default_factory=dict)
    literal: np.ndarray | None = None
    parameter_number: int | None = None
    location: SourceLocation | None = None
    # Attributes without meaning under the numerics contract (metadata, sharding, ...), kept
    # verbatim for display and never printed canonically.
    ignored_attrs: dict[str, str] = field(default_factory=dict)
    # The passes' decisions for the backend (compiler/passes/backend_decisions.py), recorded
    # after the last rewrite. Never printed: the canonical text and graph_hash do not see it.
    decisions: Decisions | None = None

    @property
    def array_shape(self) -> ArrayShape:
        """The shape, which must be an array shape (the verifier guarantees it where used)."""
        assert isinstance(self.shape, ArrayShape), f"%{self.name} has a tuple shape"
        return self.shape

    def called_computations(self) -> list[Computation]:
        """The computations this instruction calls, in attribute order."""
        called: list[Computation] = []
        for key in COMPUTATION_ATTRIBUTES:
            value = self.attrs.get(key)
            if isinstance(value, Computation):
                called.append(value)
            elif isinstance(value, tuple):
                called.extend(v for v in value if isinstance(v, Computation))
        return called

    def __repr__(self) -> str:
        return f"<Instruction %{self.name} = {self.shape} {self.opcode}>"


@dataclass(eq=False)
class Computation:
    """A computation: instructions in definition order and the root."""

    name: str
    instructions: list[Instruction]
    root: Instruction
    location: SourceLocation | None = None
    # Set by the scheduling pass: `instructions` is then the execution order.
    scheduled: bool = False

    @property
    def parameters(self) -> list[Instruction]:
        """The parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.parameter_number)

    def post_order(self) -> list[Instruction]:
        """Instructions reachable from the root, operands before users, parameters first in
        parameter-number order; independent of the order the text listed them in.

        Raises CycleError if an instruction depends on itself."""
        order: list[Instruction] = list(self.parameters)
        done = {id(i) for i in order}
        in_progress: set[int] = set()
        stack: list[tuple[Instruction, int]] = [(self.root, 0)]
        while stack:
            instruction, next_operand = stack.pop()
            if id(instruction) in done:
                continue
            in_progress.add(id(instruction))
            if next_operand < len(instruction.operands):
                stack.append((instruction, next_operand + 1))
                operand = instruction.operands[next_operand]
                if id(operand) in in_progress:
                    raise CycleError(instruction)
                if id(operand) not in done:
                    stack.append((operand, 0))
                continue
            in_progress.discard(id(instruction))
            done.add(id(instruction))
            order.append(instruction)
        return order

    def execution_order(self) -> list[Instruction]:
        """The order instructions run in: the schedule once the scheduling pass has set one,
        otherwise the post order. Only instructions the root depends on, parameters first."""
        order = self.post_order()
        if not self.scheduled:
            return order
        live = {id(i) for i in order}
        return [i for i in self.instructions if id(i) in live]

    def __repr__(self) -> str:
        return f"<Computation %{self.name} ({len(self.instructions)} instructions)>"


@dataclass(eq=False)
class Module:
    """An HLO module: its computations in text order and the entry computation."""

    name: str
    computations: list[Computation]
    entry: Computation
    # Parameter and result shapes declared in the header (entry_computation_layout), if any.
    entry_layout: tuple[tuple[Shape, ...], Shape] | None = None

    def computation(self, name: str) -> Computation:
        for computation in self.computations:
            if computation.name == name:
                return computation
        raise KeyError(name)

    def reachable_computations(self) -> list[Computation]:
        """Computations reachable from the entry, callees before callers, entry last."""
        return computation_closure([self.entry])

    def instructions(self) -> Iterator[Instruction]:
        for computation in self.computations:
            yield from computation.instructions


def computation_closure(roots: Sequence[Computation]) -> list[Computation]:
    """`roots` and every computation they call, transitively, callees before callers, each
    once, in the order a post-order walk from each root in turn reaches them."""
    order: list[Computation] = []
    seen: set[int] = set()

    def visit(computation: Computation) -> None:
        if id(computation) in seen:
            return
        seen.add(id(computation))
        for instruction in computation.post_order():
            for callee in instruction.called_computations():
                visit(callee)
        order.append(computation)

    for root in roots:
        visit(root)
    return order
