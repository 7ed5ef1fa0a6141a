"""The step list of one element, and the recorder that builds it.

A step is one scalar operation of compiler/reference/scalar.py applied to earlier steps, or
one of the ways a value enters: ELEMENT (the index of the element, the one input of the
program), CONST (a value written in the program: a scalar literal, an algorithm's constant,
an index's stride), LOAD (the element of an operand, or of an array literal, at the flat
index an earlier step computed; the tensor's digest proves it) and TABLE (an entry of a
pinned algorithm's constant table, at an earlier step's value). Every step carries its
result's bits, so a step can be checked alone: its inputs are earlier steps' results.

Indices are steps too (integer arithmetic on ELEMENT), so what a step does never depends on
a value: the list of steps without their values, the element's *program*, is the same for
every element of the instruction and every operand value. `Step.template()` is one step's
part of it.

The recorder shares equal steps (the same load, constant or operation on the same inputs is
recorded once) and folds integer operations on constants into a constant, which keeps a
fused computation's element a DAG the size of its instructions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from attest.digests import canonical_tensor_bytes
from compiler.errors import CompilerError
from compiler.numerics.mathlib.dsl import Table
from compiler.reference.scalar import Op, Undecidable, evaluate, result_type, to_bits
from core.dtypes import F64, S64, DType


class StepKind(Enum):
    ELEMENT = "element"
    CONST = "const"
    LOAD = "load"
    TABLE = "table"
    OP = "op"


# Where a LOAD reads: (OPERAND, j) the j-th of the graph leaf's trace operands, (LITERAL, n)
# the n-th array literal the program reads, (PART, j, k) flat part k of the j-th trace
# operand, a tuple-shaped op-trace leaf (a multi-output fusion's result).
OPERAND = "operand"
LITERAL = "literal"
PART = "part"
Source = tuple[str, int] | tuple[str, int, int]


@dataclass(frozen=True)
class Step:
    """One step. `dtype` is the operand type of an OP (the value's type otherwise) and
    `result_dtype` the type of `value`. LOAD: `source` says where it reads (Source) and
    `args` the flat index step; TABLE: `table` names the table and `args` holds the index
    step. `decided` is false for a ROUND_F32_CR the machine cannot decide; its value is then
    the reference's (MPFR)."""

    kind: StepKind
    dtype: DType
    result_dtype: DType
    value: int
    op: Op | None = None
    args: tuple[int, ...] = ()
    source: Source | None = None
    table: str | None = None
    decided: bool = True

    def template(self) -> tuple:
        """What the step does, without its value (a CONST's value is what it does): the
        same for every element of an instruction."""
        immediate = self.value if self.kind is StepKind.CONST else None
        op = None if self.op is None else int(self.op)
        return (
            self.kind.value,
            op,
            self.dtype.name,
            self.result_dtype.name,
            self.args,
            self.source,
            self.table,
            immediate,
        )

    def describe(self) -> str:
        if self.kind is StepKind.ELEMENT:
            return "element"
        if self.kind is StepKind.LOAD:
            assert self.source is not None
            where = " ".join(str(s) for s in self.source)
            return f"load {where}[#{self.args[0]}] : {self.dtype.name}"
        if self.kind is StepKind.CONST:
            return f"const {self.dtype.name} {self.value:#x}"
        if self.kind is StepKind.TABLE:
            return f"table {self.table}[#{self.args[0]}]"
        assert self.op is not None
        types = (
            self.dtype.name
            if self.dtype == self.result_dtype
            else f"{self.dtype.name}->{self.result_dtype.name}"
        )
        return f"{self.op.name.lower()}.{types} " + ", ".join(f"#{a}" for a in self.args)


class Uncovered(CompilerError):
    """An instruction whose element steps the recorder does not define (yet): the dispute of
    such an element stays with the committee (docs/disputes.md)."""

    def __init__(self, opcode: str, why: str) -> None:
        super().__init__(f"{opcode}: {why}")
        self.opcode = opcode
        self.why = why


@dataclass
class Recorder:
    """Appends steps; returns each step's index (a handle) and shares equal steps."""

    operands: list[np.ndarray]
    steps: list[Step] = field(default_factory=list)
    literals: list[np.ndarray] = field(default_factory=list)
    tables: dict[str, Table] = field(default_factory=dict)
    sizes: dict[Source, int] = field(default_factory=dict)  # elements of each LOAD source
    _shared: dict[tuple, int] = field(default_factory=dict)
    _literal_numbers: dict[int, int] = field(default_factory=dict)

    def _add(self, key: tuple, step: Step) -> int:
        index = self._shared.get(key)
        if index is None:
            index = self._shared[key] = len(self.steps)
            self.steps.append(step)
        return index

    def dtype(self, handle: int) -> DType:
        return self.steps[handle].result_dtype

    def bits(self, handle: int) -> int:
        return self.steps[handle].value

    def element(self, value: int) -> int:
        """The program's input: the element's flat index (s64)."""
        return self._add(("element",), Step(StepKind.ELEMENT, S64, S64, value))

    def load(self, operand: int, index: int, dtype: DType, source: Source | None = None) -> int:
        """Operand `operand`'s element at the flat index step `index`; the program names
        `source` as where it reads, by default (OPERAND, operand)."""
        return self._load(
            (OPERAND, operand) if source is None else source, self.operands[operand], index, dtype
        )

    def load_literal(self, literal: np.ndarray, index: int, dtype: DType) -> int:
        """An array literal's element at the flat index step `index` (literals are numbered
        in the order the program first reads them)."""
        number = self._literal_numbers.setdefault(id(literal), len(self.literals))
        if number == len(self.literals):
            self.literals.append(literal)
        return self._load((LITERAL, number), literal, index, dtype)

    def _load(self, source: Source, array: np.ndarray, index: int, dtype: DType) -> int:
        flat = _signed64(self.bits(index))
        self.sizes[source] = int(np.asarray(array).size)
        # The element as its tensor's digest holds it: a NaN is the canonical NaN.
        value = int.from_bytes(
            canonical_tensor_bytes(np.asarray(array).reshape(-1)[flat : flat + 1]), "little"
        )
        return self._add(
            ("load", source, index),
            Step(StepKind.LOAD, dtype, dtype, value, args=(index,), source=source),
        )

    def const(self, dtype: DType, bits: int) -> int:
        return self._add(("const", dtype.name, bits), Step(StepKind.CONST, dtype, dtype, bits))

    def table(self, table: Table, index: int) -> int:
        """Entry `index` (a step) of a pinned algorithm's constant table."""
        entry_dtype = F64 if table.is_float else S64
        self.tables.setdefault(table.name, table)
        position = _signed64(self.bits(index))
        value = to_bits(np.array([table.values[position]], dtype=entry_dtype.numpy), entry_dtype)
        return self._add(
            ("table", table.name, index),
            Step(StepKind.TABLE, entry_dtype, entry_dtype, value, args=(index,), table=table.name),
        )

    def op(
        self,
        op: Op,
        *args: int,
        to: DType | None = None,
        dtype: DType | None = None,
        undecided_value: int | None = None,
    ) -> int:
        """op on the steps `args` (of type `dtype`, by default the first's; SELECT's is its
        second's). `undecided_value` is the value the reference gives when the machine cannot
        decide (ROUND_F32_CR)."""
        operand_type = dtype or self.dtype(args[1] if op is Op.SELECT else args[0])
        target = result_type(op, operand_type, to)
        if (
            op in FOLDED
            and not operand_type.is_float
            and all(self.steps[a].kind is StepKind.CONST for a in args)
        ):
            return self.const(
                target, evaluate(op, operand_type, [self.bits(a) for a in args], target)
            )
        key = ("op", op, operand_type.name, target.name, args)
        if key in self._shared:
            return self._shared[key]
        decided = True
        try:
            value = evaluate(op, operand_type, [self.bits(a) for a in args], target)
        except Undecidable:
            if undecided_value is None:
                raise
            value, decided = undecided_value, False
        return self._add(
            key,
            Step(
                StepKind.OP, operand_type, target, value, op=op, args=tuple(args), decided=decided
            ),
        )


# Integer operations on constants give a constant (index arithmetic on static strides and
# offsets); floating-point ones are always recorded, as the algorithms write them.
FOLDED = frozenset(
    {
        Op.ADD,
        Op.SUB,
        Op.MUL,
        Op.FLOOR_DIV,
        Op.REM,
        Op.MIN,
        Op.MAX,
        Op.LT,
        Op.LE,
        Op.GE,
        Op.GT,
        Op.EQ,
        Op.AND,
        Op.OR,
    }
)


def _signed64(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits
