"""The steps of one element: every scalar operation the numerics contract performs to compute
one output element of one instruction, in order, with its inputs and result.

    trace = element_steps(instruction, operands, element)
    trace.steps[-1].value == the element's bits, as the reference evaluator computes it

`instruction` is an op-trace leaf of the optimized module (a fusion, a dot, a reduce, ...),
`operands` its operand values (what `compiler.reference.leaf.leaf_operands` builds from the
values the parties serve), `element` a flat row-major index into its result. The steps
follow docs/numerics.md and never the backend: a fused computation's inner instructions
element by element, a dot's or a convolution's fma chain, a reduction's pinned tree, a
reduce-window's fold, the math functions' pinned algorithms (their binary64 and int64
operations), conversions and the integer ops. The dispute game narrows a disagreement about
an element to one of these steps, which the contract evaluates (docs/disputes.md).

An instruction the recorder does not cover raises `Uncovered`, naming the opcode and why;
COVERAGE lists what is covered and UNCOVERED the families that are not, with the reason.

The op families' rules live beside the reference's own modules, in the same grouping:
elementwise, data_movement, reductions, dot_conv, control_flow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from attest.merkle import merkle_root
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.shape import ArrayShape, TupleShape
from compiler.numerics.mathlib.dsl import Table
from compiler.reference.scalar import canonical
from core.dtypes import from_name

from . import indexing
from .program import ProgramCommitment, output_header, program_leaves, values_root
from .record import LITERAL, OPERAND, PART, Recorder, Source, Step, StepKind, Uncovered

_T = TypeVar("_T")
Handle = int | tuple  # a step index, or a tuple of handles for a tuple-shaped value


@dataclass(frozen=True)
class StepTrace:
    """The steps of one element and the handle of its result (the last step's value is the
    element unless the result is shared with an earlier step, as for a moved element)."""

    steps: tuple[Step, ...]
    result: int
    literals: tuple[np.ndarray, ...] = ()
    tables: tuple[tuple[str, Table], ...] = ()
    sizes: tuple[tuple[Source, int], ...] = ()  # element count of each LOAD source
    output: tuple[str, tuple[int, ...]] = ("f32", ())  # the output's element type and dims

    @property
    def value(self) -> int:
        """The element as its tensor's digest holds it (a NaN canonical)."""
        step = self.steps[self.result]
        return canonical(step.value, step.result_dtype)

    @property
    def program(self) -> tuple[tuple, ...]:
        """The steps without their values: the instruction's element program, the same for
        every element and every operand value."""
        return tuple(step.template() for step in self.steps)

    def commitment(self) -> ProgramCommitment:
        """The program's commitment as the chain reads it."""
        dtype, dims = self.output
        header = hashlib.sha256(output_header(from_name(dtype).numpy, dims)).hexdigest()
        elements = int(np.prod(dims, dtype=np.int64))
        return ProgramCommitment(
            merkle_root(self.program_leaves()), len(self.steps), self.result, elements, header
        )

    def program_leaves(self) -> list[bytes]:
        return program_leaves(self.steps, dict(self.sizes), self.literals, dict(self.tables))

    def values_root(self) -> str:
        """The root a party commits to for this element: its value of every step."""
        return values_root(self.steps)

    @property
    def decided(self) -> bool:
        """Whether every step is one the machine decides alone."""
        return all(step.decided for step in self.steps)


class Scope:
    """Where a computation's parameters come from: `parameter(number, index)` gives the
    element `index` of parameter `number` as a handle."""

    def __init__(self, parameter: Callable[[int, tuple[int, ...]], Handle]) -> None:
        self.parameter = parameter


Rule = Callable[["ElementEvaluator", Instruction, tuple[int, ...], Scope], Handle]


class ElementEvaluator:
    """Evaluates single elements of instructions on demand, recording their steps."""

    def __init__(
        self, recorder: Recorder, rules: dict[str, Rule], leaf: Instruction, leaf_scope: Scope
    ) -> None:
        self.recorder = recorder
        self.rules = rules
        self.leaf = leaf
        self.leaf_scope = leaf_scope
        # Scopes and expanded computations live as long as the evaluator: the memo is keyed
        # by their ids, which must not be reused.
        self._kept: list[object] = [leaf_scope]
        self._memo: dict[tuple[int, tuple[int, ...], int], Handle] = {}

    def scope(self, parameter: Callable[[int, tuple[int, ...]], Handle]) -> Scope:
        return self.keep(Scope(parameter))

    def keep(self, thing: _T) -> _T:
        self._kept.append(thing)
        return thing

    def element(self, instruction: Instruction, index: tuple[int, ...], scope: Scope) -> Handle:
        key = (id(instruction), index, id(scope))
        if key not in self._memo:
            rule = self.rules.get(instruction.opcode)
            if rule is None:
                raise Uncovered(instruction.opcode, "no element steps are defined for this opcode")
            self._memo[key] = rule(self, instruction, index, scope)
        return self._memo[key]

    def operand(
        self, instruction: Instruction, number: int, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        """Element `index` of operand `number` (a rank-0 operand of an elementwise op gives
        its one element whatever the index)."""
        operand = instruction.operands[number]
        if isinstance(operand.shape, ArrayShape) and operand.shape.rank == 0:
            index = ()  # a scalar operand of an op on arrays
        if instruction is self.leaf:  # the leaf's operands are the served values
            return self.leaf_scope.parameter(number, index)
        return self.element(operand, index, scope)

    def computation(self, computation: Computation, scope: Scope, index: tuple[int, ...]) -> Handle:
        return self.element(computation.root, index, scope)

    def apply_scalar(self, computation: Computation, arguments: Sequence[Handle]) -> Handle:
        """A computation of scalars (a reducer, a map's function) applied to handles."""
        scope = self.scope(lambda number, _index: arguments[number])
        return self.element(computation.root, (), scope)


# The opcodes whose elements have no steps yet, and why: a dispute about one of their
# elements stays with the committee (docs/disputes.md, "What the contract cannot evaluate").
UNCOVERED: dict[str, str] = {
    "sort": "an element's position depends on comparator results over the whole row (a merge network of comparator programs)",
    "topk": "an element's position depends on comparisons over the whole row",
    "select-and-scatter": "an element gathers the source elements whose windows select it (not yet)",
    "rng-bit-generator": "ThreeFry and Philox rounds over 32-bit words (the scalar machine has the integer ops; not yet)",
    "fft": "a line's passes with twiddle factors computed exactly when compiling (not yet)",
    "cholesky": "an element depends on every element left of and above it (a chain over earlier outputs; not yet)",
    "triangular-solve": "an element depends on the solved elements before it (not yet)",
    "batch-norm-training": "XLA's expansion holds reductions and broadcasts over whole features (not yet)",
    "batch-norm-inference": "XLA's expansion (not yet)",
    "batch-norm-grad": "XLA's expansion holds reductions over whole features (not yet)",
    "while": "a loop's element repeats its body per iteration, whose count is data",
    "conditional": "the computation an element follows is chosen by a value",
    "scan": "an element depends on every earlier step's carry",
    "reduce-precision": "not an operation of the scalar machine yet",
}


def _rules() -> dict[str, Rule]:
    from . import (
        control_flow,
        data_movement,
        dot_conv,
        elementwise,
        reductions,
        sort_gather_scatter,
    )

    rules: dict[str, Rule] = {}
    for family in (elementwise, data_movement, reductions, dot_conv, control_flow, sort_gather_scatter):
        rules.update(family.RULES)
    for opcode, why in UNCOVERED.items():
        rules[opcode] = _uncovered(why)
    return rules


def _uncovered(why: str) -> Rule:
    def rule(
        ev: ElementEvaluator, instruction: Instruction, index: tuple[int, ...], scope: Scope
    ) -> Handle:
        raise Uncovered(instruction.opcode, why)

    return rule


def covered_opcodes() -> frozenset[str]:
    """The opcodes whose elements have steps (some of their forms may still be uncovered:
    complex division and abs, bitcast-convert of 4-bit, pred or complex values between
    widths, tuple operands, tuple-shaped results)."""
    return frozenset(_rules()) - frozenset(UNCOVERED)


def element_steps(
    instruction: Instruction,
    operands: Sequence[np.ndarray],
    element: int,
    output: int = 0,
    sources: Sequence[Source | None] | None = None,
) -> StepTrace:
    """The steps of element `element` (flat, row-major) of output buffer `output` of
    `instruction` (0 for an array; a tuple's flat parts in order), whose operands hold
    `operands`. `sources` says what each operand is to the chain: (OPERAND, p) the p-th of
    the graph leaf's trace operands, (PART, p, k) flat part k of that trace operand (a tuple),
    (LITERAL, 0) an entry constant or job input (its digest goes into the program), None
    something a program cannot read; by default operand k is (OPERAND, k). Raises Uncovered
    for an instruction without element steps."""
    shape = _output_shape(instruction, output)
    if any(isinstance(o, tuple) for o in operands):
        raise Uncovered(instruction.opcode, "an operand is a tuple")
    if not 0 <= element < shape.element_count:
        raise ValueError(
            f"element {element} is outside {instruction.opcode}'s {shape.element_count} elements"
        )
    recorder = Recorder([np.asarray(o) for o in operands])

    def leaf_operand(number: int, coords: tuple[int, ...]) -> Handle:
        operand_shape = instruction.operands[number].array_shape
        flat = indexing.flat(recorder, coords, operand_shape.dims)
        source = (OPERAND, number) if sources is None else sources[number]
        if source is None:
            raise Uncovered(instruction.opcode, f"operand {number} is a tuple inside a tuple-shaped op-trace leaf")
        if source[0] == LITERAL:
            return recorder.load_literal(recorder.operands[number], flat, operand_shape.dtype)
        return recorder.load(number, flat, operand_shape.dtype, source)

    top = Scope(leaf_operand)
    evaluator = ElementEvaluator(recorder, _rules(), instruction, top)
    index = indexing.unflat(recorder, recorder.element(element), shape.dims)
    with np.errstate(all="ignore"):
        if isinstance(instruction.shape, TupleShape):
            from .control_flow import output_element

            result = output_element(evaluator, instruction, output, index, top)
        else:
            result = evaluator.element(instruction, index, top)
    assert isinstance(result, int)
    sizes = dict(recorder.sizes)
    return StepTrace(
        tuple(recorder.steps),
        result,
        tuple(recorder.literals),
        tuple(sorted(recorder.tables.items())),
        tuple(sorted(sizes.items())),
        (shape.dtype.name, tuple(shape.dims)),
    )


# Programs longer than this are not committed (their leaves keep the committee): recording
# one costs about 30 microseconds a step when the graph commitment is made.
MAX_PROGRAM_STEPS = 1 << 17
NO_PROGRAM = "00" * 32


def program_digest(
    instruction: Instruction,
    sources: Sequence[Source | None] | None = None,
    inputs: Sequence[np.ndarray] | None = None,
) -> str:
    """The element program commitment's digest of an op-trace leaf, or NO_PROGRAM when its
    elements have no steps (Uncovered), it has several outputs or none, or its program is
    longer than MAX_PROGRAM_STEPS. Programs do not depend on the values of op-trace leaves:
    element 0 on zero operands records it. A job input the leaf reads is loaded like an array
    literal, its digest in the program: without the job's `inputs`, such a leaf has none."""
    if not isinstance(instruction.shape, ArrayShape) or instruction.shape.element_count == 0:
        return NO_PROGRAM
    if _estimated_steps(instruction) > MAX_PROGRAM_STEPS:
        return NO_PROGRAM
    operands = []
    for operand in instruction.operands:
        if not isinstance(operand.shape, ArrayShape):
            return NO_PROGRAM
        is_literal = operand.opcode == "constant" and operand.literal is not None
        if operand.opcode == "parameter":
            if inputs is None or not 0 <= operand.parameter_number < len(inputs):
                return NO_PROGRAM
            operands.append(np.asarray(inputs[operand.parameter_number]))
            continue
        operands.append(
            np.asarray(operand.literal)
            if is_literal
            else np.zeros(operand.shape.dims, operand.shape.dtype.numpy)
        )
    try:
        trace = element_steps(instruction, operands, 0, sources=sources)
    except Uncovered:
        return NO_PROGRAM
    return trace.commitment().digest if len(trace.steps) <= MAX_PROGRAM_STEPS else NO_PROGRAM


def _estimated_steps(instruction: Instruction) -> int:
    """A cheap upper bound's order of magnitude: the operands' elements an element may read
    (a contraction or reduction reads at most its operands), times a few steps each; and a
    scatter's (the leaf's or a fused one's) positions, every one of which each element
    visits."""
    from compiler.hlo.ir import computation_closure

    from .sort_gather_scatter import scatter_steps_estimate

    reads = sum(
        operand.shape.element_count
        for operand in instruction.operands
        if isinstance(operand.shape, ArrayShape)
    )
    estimate = 0 if reads <= MAX_PROGRAM_STEPS else reads // max(instruction.shape.element_count, 1)  # type: ignore[union-attr]
    inner = [i for c in computation_closure(instruction.called_computations()) for i in c.instructions]
    for scatter in (i for i in [instruction, *inner] if i.opcode == "scatter"):
        estimate = max(estimate, scatter_steps_estimate(scatter))
    return estimate


def program_digests(module: Module, inputs: Sequence[np.ndarray] | None = None) -> list[str]:
    """program_digest of each op-trace leaf of an optimized module, in trace order, its
    operands read as the graph records place them (operand_sources); the job's `inputs`
    give the programs of the leaves that read them."""
    from compiler.hlo.commitment import graph_records, trace_leaves

    records = graph_records(module)
    leaves = trace_leaves(module)
    with np.errstate(all="ignore"):
        return [
            program_digest(leaf, operand_sources(record.operands, record.trace_operands, leaves), inputs)
            for leaf, record in zip(leaves, records, strict=False)
        ]


def operand_sources(
    positions: Sequence[dict], trace_operands: Sequence[int], leaves: Sequence[Instruction]
) -> list[Source | None]:
    """What a program's LOAD of each operand names, from the record's POSITIONs: a whole
    op-trace leaf is its place among the graph leaf's trace operands (whose digests the
    game proves); an array inside a tuple-shaped leaf (`leaves` the module's op-trace
    leaves) is that place and its flat part (whose digest proves against the tuple's); an
    entry constant or a job input is a literal (its digest in the program). A tuple inside
    a tuple-shaped leaf cannot be read."""
    from compiler.hlo.commitment import flat_part

    sources: list[Source | None] = []
    for position in positions:
        if "trace" in position:
            number = list(trace_operands).index(position["trace"])
            if "path" not in position:
                sources.append((OPERAND, number))
                continue
            part = flat_part(leaves[position["trace"]].shape, position["path"])
            sources.append(None if part is None else (PART, number, part))
        elif "constant" in position or "parameter" in position:
            sources.append((LITERAL, 0))
        else:
            sources.append(None)
    return sources


def _output_shape(instruction: Instruction, output: int) -> ArrayShape:
    shape = instruction.shape
    if isinstance(shape, ArrayShape):
        if output:
            raise ValueError(f"{instruction.opcode} has one output, not {output + 1}")
        return shape
    parts = [s for s in shape.elements]
    if any(not isinstance(p, ArrayShape) for p in parts):
        raise Uncovered(instruction.opcode, "a nested tuple result")
    if not 0 <= output < len(parts):
        raise ValueError(f"{instruction.opcode} has {len(parts)} outputs, not {output + 1}")
    return parts[output]  # type: ignore[return-value]


__all__ = [
    "operand_sources",
    "MAX_PROGRAM_STEPS",
    "NO_PROGRAM",
    "program_digest",
    "program_digests",
    "UNCOVERED",
    "covered_opcodes",
    "ElementEvaluator",
    "Scope",
    "Step",
    "StepKind",
    "StepTrace",
    "Uncovered",
    "element_steps",
]
