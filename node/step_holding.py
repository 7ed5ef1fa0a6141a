"""What a party holds of a disputed instruction for the step referee (node/step_protocol.py's
InstructionHolding), from the instruction, its graph record, its operands' values and the
party's output: the element program, the output's chunk tree, and an element's values of the
program's steps by the reference (compiler.api.element_steps), never by a backend.

`reference_side` builds one from the reference evaluator's run of the job: what a node's
execution process (node/daemon/sandbox.py) and a submitter disputing from the SDK hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from attest.digests import tensor_digest
from attest.tensor_proof import ChunkTree, chunk_tree, element_proof
from compiler.api import (
    NO_PROGRAM,
    UNCOVERED,
    StepKind,
    StepTrace,
    decode_program_leaf,
    element_steps,
    evaluate,
    flatten_value,
    operand_sources,
    table_entry_proof,
    trace_leaves,
    value_leaf,
)
from node.step_protocol import ElementValues, ProgramClaim, StepOpening

OPERAND_SOURCE, LITERAL_SOURCE, PART_SOURCE = 1, 2, 3  # a LOAD template's source codes

Value = np.ndarray | tuple  # an instruction's value: an array, or a (nested) tuple of them


class InstructionSide:
    """One party's holding of instruction `leaf` (an op-trace leaf, `record` its graph record,
    `leaves` the module's op-trace leaves): the values of the instruction's operands
    (`operands`, in its operand order), of its graph record's trace operands
    (`trace_operands`, what a LOAD names: a tuple-shaped one's parts too) and its output
    (which an instruction without an element program need not hold)."""

    def __init__(self, leaf, record, leaves, operands: Sequence[np.ndarray], trace_operands: Sequence[Value], output: np.ndarray | None) -> None:  # noqa: ANN001 - compiler types
        self.leaf = leaf
        self.record = record
        self.operands = [np.asarray(o) for o in operands]
        self.trace_operands = [[np.asarray(a) for a in flatten_value(o)] for o in trace_operands]
        self.output_array = None if output is None else np.asarray(output)  # None: no program
        self._sources = operand_sources(record.operands, record.trace_operands, leaves) if output is not None else []
        self._traces: dict[int, StepTrace] = {}
        self._elements: dict[int, ElementValues] = {}

    @property
    def record_body(self) -> bytes:
        return self.record.body_digest()

    def trace(self, element: int) -> StepTrace:
        """The reference's steps of output element `element`."""
        if element not in self._traces:
            self._traces[element] = element_steps(self.leaf, self.operands, element, sources=self._sources)
        return self._traces[element]

    @cached_property
    def program(self) -> ProgramClaim | None:
        if self.record.program == NO_PROGRAM:
            return None
        trace = self.trace(0)
        commitment = trace.commitment()
        return ProgramClaim(
            record_body=self.record_body,
            root=bytes.fromhex(commitment.root),
            result=commitment.result,
            elements=commitment.elements,
            header_hash=bytes.fromhex(commitment.header),
            templates=tuple(trace.program_leaves()),
        )

    @cached_property
    def output(self) -> ChunkTree:
        return chunk_tree(self.output_array)

    def values(self, element: int) -> list[int]:
        """This party's values of the element's steps."""
        return [step.value for step in self.trace(element).steps]

    def element(self, element: int) -> ElementValues:
        if element not in self._elements:
            values = tuple(self.values(element))
            self._elements[element] = ElementValues(element, values, tuple(value_leaf(v) for v in values))
        return self._elements[element]

    def opening(self, element: int, step: int) -> StepOpening:
        trace = self.trace(element)
        values = self.element(element).values
        program = self.program
        assert program is not None, "an instruction without an element program has no steps to open"
        template = decode_program_leaf(program.templates[step])
        if template.kind is StepKind.LOAD:
            index = values[template.args[0]]
            if template.source == LITERAL_SOURCE:
                return StepOpening(template.args, load=element_proof(trace.literals[template.number], index))
            parts = self.trace_operands[template.number]
            if template.source == OPERAND_SOURCE:
                return StepOpening(template.args, load=element_proof(parts[0], index))
            digests = tuple(bytes.fromhex(tensor_digest(p)) for p in parts)
            return StepOpening(template.args, load=element_proof(parts[template.part], index), parts=digests)
        if template.kind is StepKind.TABLE:
            table = dict(trace.tables)[trace.steps[step].table]
            value, siblings = table_entry_proof(table, values[template.args[0]])
            return StepOpening(template.args, entry=(int.from_bytes(value, "big"), tuple(siblings)))
        return StepOpening(template.args)


def reference_side(module, record, arrays: Sequence[np.ndarray], index: int, max_while_iterations: int | None = None) -> InstructionSide:  # noqa: ANN001 - compiler types
    """The holding of op-trace leaf `index` of the optimized `module` (`record` its graph
    record) from the reference evaluator's run on `arrays`. An instruction without an element
    program holds its record only (the committee decides it: nothing is evaluated). ValueError
    naming why when the instruction has a program but no element steps here."""
    leaves = trace_leaves(module)
    leaf = leaves[index]
    if record.program == NO_PROGRAM:
        return InstructionSide(leaf, record, leaves, [], [], None)
    wanted = {id(leaf), *(id(o) for o in leaf.operands), *(id(leaves[j]) for j in record.trace_operands)}
    values: dict[int, object] = {}

    def observe(instruction, value) -> None:  # noqa: ANN001
        if id(instruction) in wanted:
            values[id(instruction)] = value

    evaluate(module, list(arrays), max_while_iterations=max_while_iterations, observer=observe)
    arrays_wanted = (id(leaf), *(id(o) for o in leaf.operands))  # a trace operand may be a tuple
    if any(w not in values for w in wanted) or any(isinstance(values[w], tuple) for w in arrays_wanted):
        raise ValueError(f"instruction {index} ({leaf.opcode}) has no element steps here: {UNCOVERED.get(leaf.opcode, 'a tuple-shaped value')}")
    return InstructionSide(
        leaf, record, leaves, [values[id(o)] for o in leaf.operands], [values[id(leaves[j])] for j in record.trace_operands], values[id(leaf)]
    )

