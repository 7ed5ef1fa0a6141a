"""The graph commitment of an optimized module (docs/disputes.md, "The graph commitment").

A job posts `graphRoot` and `traceLeaves` (n): the commitment of n + 1 records, one per
op-trace leaf (every entry instruction that computes a value, in execution order, exactly the
trace points compiler/codegen/lower.py records, named as there by `canonical_names`), then
the result record (index n) whose single operand is the entry root's value. The records say,
per instruction, where each operand's value comes from (a POSITION, through the tuple
plumbing) and what function of its operands it computes (`attributes`), so the chain can open
one instruction of a dispute against the graph both parties compiled.

`attributes` is the SHA-256 of the instruction's *description*, the canonical printer's text
(compiler/hlo/printer.py) made independent of everything but the instruction:

    <canonical text of every computation it calls, transitively, callees before callers,
     named computation.0, computation.1, ... in that order>
    <the instruction's canonical body, its operands named %operand.0, %operand.1, ...>

lines joined by "\\n", e.g. for a fusion of a reduce

    %computation.0 {
      %parameter.0 = f32[]{} parameter(0)
      ...
    }
    %computation.1 {
      ...
      ROOT %reduce.3 = f32[]{} reduce(...), dimensions={0}, to_apply=%computation.0
    }
    f32[]{} fusion(%operand.0), calls=%computation.1, kind=kInput

Operand k is `%operand.k` whatever value fills it (the record's operands say which), so two
records agree exactly when their instructions apply the same function to the same values;
called computations are numbered inside the description, not by their place in the module,
so an instruction's attributes do not move when another instruction changes. The body is
`CanonicalPrinter.instruction_body` (shape with layout, opcode, sorted attributes);
the passes' backend decisions are never printed, like in the canonical text.

The compiler's layers (tests/test_import_direction.py) put this module in compiler/hlo/: it
needs only the IR, the printer and attest. `graph_commitment(program, config)`, which runs the
config's pass pipeline first, is in compiler/driver.py beside `optimize`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attest.commitment import commitment_proof, commitment_root
from attest.digests import sha256_hex, tensor_digest, text_digest
from attest.statement import canonical_json
from compiler.errors import CompilerError
from compiler.hlo.ir import Computation, Instruction, Module, computation_closure
from compiler.hlo.opcodes import NOT_TRACED
from compiler.hlo.printer import CanonicalPrinter, canonical_names
from compiler.hlo.shape import Shape, TupleShape, flatten

# v2: a constant's POSITION holds its vxla.tensor.v2 digest (v1 held the vxla.tensor.v1 one).
# v3: a graph leaf's first 32 bytes bind the instruction's element program too (`GraphRecord.leaf`).
# v4: an element program may read a part of a tuple-shaped op-trace leaf (its LOAD names the
# part), so instructions reading a multi-output fusion's outputs bind programs, not none; and a
# gather has element steps, so it binds a program too.
GRAPH_RECORD_FORMAT = "vxla.graph-record.v4"
# The program digest of an instruction whose elements have no steps (the committee decides it).
NO_PROGRAM = "00" * 32
# The result record's attributes: it computes nothing, it names the outputs.
RESULT_ATTRIBUTES = sha256_hex(b"")

# A POSITION (docs/disputes.md): {"trace": j} / {"trace": j, "path": [k, ...]} /
# {"parameter": p} / {"constant": tensor digest} / {"tuple": [POSITION, ...]}.
Position = dict[str, Any]


@dataclass(frozen=True)
class GraphRecord:
    """One record of the graph commitment: an op-trace leaf (index < n) or the result record
    (index n). `trace_operands` are the distinct op-trace leaves its operands read, in first
    appearance order: the tail of its graph leaf."""

    index: int
    name: str
    opcode: str
    shape: str
    operands: tuple[Position, ...]
    attributes: str
    trace_operands: tuple[int, ...]
    program: str = NO_PROGRAM  # the element program's commitment digest (compiler/reference/steps)

    def to_dict(self) -> dict[str, Any]:
        """The record as the spec writes it (without the tail, which the leaf carries)."""
        return {
            "format": GRAPH_RECORD_FORMAT,
            "index": self.index,
            "name": self.name,
            "opcode": self.opcode,
            "shape": self.shape,
            "operands": list(self.operands),
            "attributes": self.attributes,
        }

    def to_json_bytes(self) -> bytes:
        """Canonical JSON of the record (attest.statement.canonical_json)."""
        return canonical_json(self.to_dict())

    def body_digest(self) -> bytes:
        """SHA-256 of the record's JSON."""
        return hashlib.sha256(self.to_json_bytes()).digest()

    def leaf(self) -> bytes:
        """The graph leaf: SHA-256(program digest || SHA-256 of the JSON) (32 raw bytes), then
        each trace operand as 4 bytes big-endian, so the chain reads the leaves an instruction
        needs without JSON, and a referee that evaluates one step of the instruction's element
        program proves the program from the leaf (contracts/src/StepReferee.sol)."""
        tail = b"".join(j.to_bytes(4, "big") for j in self.trace_operands)
        return hashlib.sha256(bytes.fromhex(self.program) + self.body_digest()).digest() + tail


@dataclass(frozen=True)
class GraphCommitment:
    """What a job posts: `root` (graphRoot) over `records`, `trace_leaves` (n) of them op-trace
    leaves, the last one the result record."""

    root: str
    trace_leaves: int
    records: tuple[GraphRecord, ...]

    def leaves(self) -> list[bytes]:
        """The graph leaves of records 0..n-1 (the n-leaf tree under the root)."""
        return [record.leaf() for record in self.records[: self.trace_leaves]]

    def proof(self, index: int) -> list[str]:
        """The commitment proof of record `index` (0..n) against `root`."""
        return commitment_proof(self.leaves(), self.records[-1].leaf(), index)


def commit_graph(module: Module, programs: Sequence[str] | None = None) -> GraphCommitment:
    """The graph commitment of an optimized module (see the module docstring); `programs`
    holds each op-trace leaf's element program digest (NO_PROGRAM where it has none; all
    NO_PROGRAM when not given)."""
    records = graph_records(module)
    if programs is not None:
        if len(programs) != len(records) - 1:
            raise CompilerError(
                f"{len(programs)} program digests for {len(records) - 1} op-trace leaves"
            )
        records = [
            replace(r, program=p) for r, p in zip(records, programs, strict=False)
        ] + records[-1:]
    leaves = [record.leaf() for record in records]
    return GraphCommitment(
        commitment_root(leaves[:-1], leaves[-1]), len(records) - 1, tuple(records)
    )


def is_trace_leaf(instruction: Instruction) -> bool:
    """Whether an entry instruction is an op-trace leaf: it computes a value (its opcode is not
    in NOT_TRACED: parameters, constants and the tuple plumbing are not)."""
    return instruction.opcode not in NOT_TRACED


def trace_leaves(module: Module) -> list[Instruction]:
    """The op-trace leaves of an optimized module, in trace order: leaf i is the instruction of
    graph record i (the enumeration `graph_records` makes)."""
    return [
        instruction for instruction in module.entry.execution_order() if is_trace_leaf(instruction)
    ]


def graph_records(module: Module) -> list[GraphRecord]:
    """The n + 1 records of an optimized module: one per instruction of the entry's execution
    order whose opcode is traced (not in NOT_TRACED), then the result record."""
    entry = module.entry
    names = canonical_names(entry)
    positions: dict[int, Position] = {}
    records: list[GraphRecord] = []
    for instruction in entry.execution_order():
        if not is_trace_leaf(instruction):
            positions[id(instruction)] = _plumbing_position(instruction, positions)
            continue
        operands = tuple(positions[id(op)] for op in instruction.operands)
        records.append(
            GraphRecord(
                index=len(records),
                name=names[id(instruction)],
                opcode=instruction.opcode,
                shape=instruction.shape.str_without_layout(),
                operands=operands,
                attributes=text_digest(describe(module, instruction)),
                trace_operands=trace_operands(operands),
            )
        )
        positions[id(instruction)] = {"trace": len(records) - 1}
    outputs = (positions[id(entry.root)],)
    records.append(
        GraphRecord(
            index=len(records),
            name="result",
            opcode="result",
            shape=entry.root.shape.str_without_layout(),
            operands=outputs,
            attributes=RESULT_ATTRIBUTES,
            trace_operands=trace_operands(outputs),
        )
    )
    return records


def _plumbing_position(instruction: Instruction, positions: dict[int, Position]) -> Position:
    """The position of an untraced instruction's value: where it comes from, not a leaf."""
    opcode = instruction.opcode
    if opcode == "parameter":
        return {"parameter": instruction.parameter_number}
    if opcode == "constant":
        return {"constant": tensor_digest(np.asarray(instruction.literal))}
    operands = [positions[id(op)] for op in instruction.operands]
    if opcode == "tuple":
        return {"tuple": operands}
    if opcode == "opt-barrier":
        return operands[0]  # the same value, only ordered
    if opcode == "get-tuple-element":
        return element(operands[0], instruction.attrs["index"])  # type: ignore[arg-type]
    raise CompilerError(f"%{instruction.name}: no graph position for untraced opcode {opcode}")


def element(position: Position, index: int) -> Position:
    """The position of element `index` of a tuple value: the tuple's element itself, or the
    path one deeper into a traced tuple output."""
    if "tuple" in position:
        return position["tuple"][index]
    if "trace" in position:
        return {"trace": position["trace"], "path": [*position.get("path", []), index]}
    raise CompilerError(f"element {index} of a value that is not a tuple: {position}")


def flat_part(shape: Shape, path: Sequence[int]) -> int | None:
    """The flat output buffer of a tuple-shaped op-trace leaf (`shape`) that a position's
    `path` reaches: the leaf's digest is the tuple digest of its flat buffers' digests, in
    order (compiler/reference/leaf.py). None when the path ends at a tuple, not an array."""
    part = 0
    for index in path:
        if not isinstance(shape, TupleShape) or not 0 <= index < len(shape.elements):
            raise CompilerError(f"path {list(path)} leaves the tuple shape it indexes")
        part += sum(len(flatten(s)) for s in shape.elements[:index])
        shape = shape.elements[index]
    return None if isinstance(shape, TupleShape) else part


def trace_operands(positions: Sequence[Position]) -> tuple[int, ...]:
    """The distinct op-trace leaves the positions read, in first appearance order (depth
    first through tuples)."""
    found: list[int] = []

    def visit(position: Position) -> None:
        if "trace" in position:
            if position["trace"] not in found:
                found.append(position["trace"])
        elif "tuple" in position:
            for inner in position["tuple"]:
                visit(inner)

    for position in positions:
        visit(position)
    return tuple(found)


class _DescriptionPrinter(CanonicalPrinter):
    """The canonical printer with the computations one instruction calls named by their order
    in its description, not by their place in the whole module (so the module's printer
    state, all reachable computations and their numbering, is deliberately not built)."""

    def __init__(self, module: Module, callees: list[Computation]) -> None:
        self.module = module
        self.computations = callees
        self.computation_names = {id(c): f"computation.{i}" for i, c in enumerate(callees)}


def describe(module: Module, instruction: Instruction) -> str:
    """The canonical description of what `instruction` computes from its operands, whose
    SHA-256 is its record's attributes (format in the module docstring)."""
    printer = _DescriptionPrinter(module, called_closure(instruction))
    lines: list[str] = []
    for computation in printer.computations:
        lines.extend(printer.print_computation(computation))
    slots = [
        Instruction(name=f"operand.{k}", opcode="parameter", shape=op.shape, parameter_number=k)
        for k, op in enumerate(instruction.operands)
    ]
    lines.append(
        printer.instruction_body(
            replace(instruction, operands=slots), {id(s): s.name for s in slots}
        )
    )
    return "\n".join(lines)


def called_closure(instruction: Instruction) -> list[Computation]:
    """Every computation `instruction` calls, transitively, callees before callers (the order
    Module.reachable_computations gives a module's)."""
    return computation_closure(instruction.called_computations())
