"""An element program as a contract reads it: each step's template as bytes, the program's
Merkle root, and the values' root a party commits to.

A dispute about an element narrows to one step (docs/disputes.md). The contract then needs
to know what that step does, without trusting either party: the program (the steps without
their values, the same for every element of the instruction, compiler/reference/steps/) is
committed as a Merkle root in the tree of attest/merkle.py, and a step's template proves
against it. The parties commit only to values: the value list's root, one leaf per step.

Template bytes (PROGRAM_LEAF_BYTES, big-endian):

    kind u8 | op u8 | dtype u8 | result type u8 | arg count u8 | args 3 x u32 |
    source u8 | source number u32 | count u64 | immediate 32 bytes

kind: STEP_KIND_CODES; op: scalar.Op (0 for a step that is not an operation); the types:
scalar.TYPE_CODES; args: earlier steps' indices (unused ones 0); source: 1 for a LOAD of an
operand, 2 for a LOAD of an array literal, 3 for a LOAD of a part of a tuple-shaped operand
(0 otherwise) and its number (the operand's place among the graph leaf's trace operands, or
the literal's); count: how many elements a LOAD's tensor or a TABLE has (a proof's position
is only meaningful in a tree of known size); immediate: a CONST's value bits, a literal
LOAD's tensor digest (the literal's element proves against it), a part LOAD's flat part
index (u32, then zeros: the part's digest proves against the operand's tuple digest, and its
element against the part's digest), a TABLE's root (its entry proves against it), zero
otherwise.

A value leaf is the value's bits as 32 bytes, big-endian; a table's leaves are its entries'
bits likewise (f64 or s64 bits, in order).

`ProgramCommitment.digest` binds the root, the step count, the result step, the output's
element count and the SHA-256 of its tensor header (which fixes its type and dimensions):
SHA-256("vxla.program.v1\\n" || root || u32 steps || u32 result || u64 elements || header hash).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from attest.digests import TENSOR_DIGEST_V2, element_type_name, tensor_digest, tensor_header
from attest.merkle import inclusion_proof, merkle_root
from compiler.numerics.mathlib.dsl import Table
from compiler.reference.scalar import TYPE_CODES, TYPES_BY_CODE, Op, evaluate, to_bits
from core.dtypes import F64, S64, DType

from .record import LITERAL, OPERAND, PART, Source, Step, StepKind

PROGRAM_VERSION = "vxla.program.v1"
STEP_KIND_CODES = {
    StepKind.ELEMENT: 0,
    StepKind.CONST: 1,
    StepKind.LOAD: 2,
    StepKind.TABLE: 3,
    StepKind.OP: 4,
}
SOURCE_CODES = {OPERAND: 1, LITERAL: 2, PART: 3}
PROGRAM_LEAF_BYTES = 5 + 12 + 5 + 8 + 32
MAX_ARGS = 3


def value_leaf(bits: int) -> bytes:
    """A value as a leaf of a value list or a table: 32 bytes, big-endian."""
    return bits.to_bytes(32, "big")


def _table_leaves(table: Table) -> list[bytes]:
    dtype = F64 if table.is_float else S64
    return [value_leaf(to_bits(np.array([v], dtype=dtype.numpy), dtype)) for v in table.values]


def table_root(table: Table) -> str:
    """The Merkle root of a pinned algorithm's table (hex); tables are constants, so each
    root is computed once."""
    return _table_root(table)


@cache
def _table_root(table: Table) -> str:
    return merkle_root(_table_leaves(table))


def table_entry_proof(table: Table, position: int) -> tuple[bytes, list[str]]:
    """The leaf of entry `position` of `table` and its inclusion proof's siblings."""
    leaves = _table_leaves(table)
    return leaves[position], list(inclusion_proof(leaves, position).siblings)


def program_leaf(
    step: Step,
    sizes: Mapping[Source, int],
    literal_digests: Sequence[str],
    tables: Mapping[str, Table],
) -> bytes:
    """The template bytes of one step (the module docstring); `literal_digests` the tensor
    digests of the program's literals, in their numbering."""
    if len(step.args) > MAX_ARGS:
        raise ValueError(f"a step has at most {MAX_ARGS} arguments")
    args = tuple(step.args) + (0,) * (MAX_ARGS - len(step.args))
    source, number, count, immediate = 0, 0, 0, b"\x00" * 32
    if step.kind is StepKind.CONST:
        immediate = value_leaf(step.value)
    elif step.kind is StepKind.LOAD:
        assert step.source is not None
        source, number = SOURCE_CODES[step.source[0]], step.source[1]
        count = sizes[step.source]
        if step.source[0] == LITERAL:
            immediate = bytes.fromhex(literal_digests[number])
        elif step.source[0] == PART:
            immediate = struct.pack(">I", step.source[2]) + b"\x00" * 28
    elif step.kind is StepKind.TABLE:
        assert step.table is not None
        count = len(tables[step.table])
        immediate = bytes.fromhex(table_root(tables[step.table]))
    op = 0 if step.op is None else int(step.op)
    head = struct.pack(
        ">BBBBB",
        STEP_KIND_CODES[step.kind],
        op,
        TYPE_CODES[step.dtype.name],
        TYPE_CODES[step.result_dtype.name],
        len(step.args),
    )
    return (
        head + struct.pack(">III", *args) + struct.pack(">BIQ", source, number, count) + immediate
    )


@dataclass(frozen=True)
class ProgramCommitment:
    """An element program's root, step count and result step, and the output it computes
    (element count, SHA-256 of its tensor header)."""

    root: str
    steps: int
    result: int
    elements: int
    header: str

    @property
    def digest(self) -> str:
        version = f"{PROGRAM_VERSION}\n".encode()
        sizes = struct.pack(">IIQ", self.steps, self.result, self.elements)
        return hashlib.sha256(
            version + bytes.fromhex(self.root) + sizes + bytes.fromhex(self.header)
        ).hexdigest()


def program_leaves(
    steps: Sequence[Step],
    sizes: Mapping[Source, int],
    literals: Sequence[np.ndarray],
    tables: Mapping[str, Table],
) -> list[bytes]:
    # Each literal (an array constant, or a job input) is hashed once, however many loads.
    digests = [tensor_digest(literal) for literal in literals]
    return [program_leaf(step, sizes, digests, tables) for step in steps]


def output_header(dtype: np.dtype, dims: Sequence[int]) -> bytes:
    """The `vxla.tensor.v2` header of an output of `dtype` and `dims` (what its digest
    hashes first; s4 and u4 name their byte holders)."""
    return tensor_header(TENSOR_DIGEST_V2, element_type_name(np.dtype(dtype)), tuple(dims))


def values_root(steps: Sequence[Step]) -> str:
    """The root a party commits to: its value of every step, in order."""
    return merkle_root([value_leaf(step.value) for step in steps])


__all__ = [
    "StepTemplate",
    "decode_program_leaf",
    "recompute_step",
    "PROGRAM_LEAF_BYTES",
    "PROGRAM_VERSION",
    "ProgramCommitment",
    "output_header",
    "program_leaf",
    "program_leaves",
    "table_entry_proof",
    "table_root",
    "value_leaf",
    "values_root",
]


@dataclass(frozen=True)
class StepTemplate:
    """A program leaf decoded: what a verifier reads to recompute one step."""

    kind: StepKind
    op: int
    dtype: DType
    result_dtype: DType
    args: tuple[int, ...]
    source: int
    number: int
    size: int
    immediate: bytes

    @property
    def part(self) -> int:
        """A part LOAD's flat part index."""
        return int(struct.unpack(">I", self.immediate[:4])[0])


_KINDS_BY_CODE = {code: kind for kind, code in STEP_KIND_CODES.items()}


def decode_program_leaf(leaf: bytes) -> StepTemplate:
    """The inverse of program_leaf; ValueError for bytes that are not a template."""
    if len(leaf) != PROGRAM_LEAF_BYTES:
        raise ValueError(f"a program leaf has {PROGRAM_LEAF_BYTES} bytes, not {len(leaf)}")
    kind, op, dtype, result_dtype, count = struct.unpack(">BBBBB", leaf[:5])
    args = struct.unpack(">III", leaf[5:17])
    source, number, size = struct.unpack(">BIQ", leaf[17:30])
    if (
        kind not in _KINDS_BY_CODE
        or dtype not in TYPES_BY_CODE
        or result_dtype not in TYPES_BY_CODE
        or count > MAX_ARGS
    ):
        raise ValueError("not a program leaf: unknown kind, type or argument count")
    return StepTemplate(
        _KINDS_BY_CODE[kind],
        op,
        TYPES_BY_CODE[dtype],
        TYPES_BY_CODE[result_dtype],
        args[:count],
        source,
        number,
        size,
        leaf[30:],
    )


def recompute_step(
    template: StepTemplate, arguments: Sequence[int], element: int, loaded: int | None = None
) -> int:
    """The value a step must have, from its template and its inputs alone: what the dispute
    contract computes for the one step the parties narrowed to. `arguments` are the values of
    the steps `template.args` names; `loaded` is a LOAD's or a TABLE's value, which the
    caller has proved (against the operand's or literal's digest at the index argument, or
    against the table root in `immediate`). Raises scalar.Undecidable and ScalarError as
    scalar.evaluate does."""
    if template.kind is StepKind.ELEMENT:
        return element
    if template.kind is StepKind.CONST:
        return int.from_bytes(template.immediate, "big")
    if template.kind in (StepKind.LOAD, StepKind.TABLE):
        if loaded is None:
            raise ValueError(f"a {template.kind.value} step needs its proved value")
        return loaded
    return evaluate(Op(template.op), template.dtype, list(arguments), template.result_dtype)
