"""First divergence between two execution traces of the same job.

Two honest nodes that ran the same job produce statements whose compared parts
(`Predicate.compared_dict`: job binding and deterministic part) are equal. When they are
not, `first_divergence` says where the traces parted: which compared fields differ (and
which of those lie upstream of execution, like a different binary_hash, which explain
everything after), and, with op-level data on both sides, the first instruction in
schedule order whose record differs, with Merkle inclusion proofs of both records against
the roots the nodes signed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from attest.errors import AttestError
from attest.merkle import InclusionProof, digest_leaves, inclusion_proof
from attest.statement import InstructionRecord, OpTrace, Statement

_DETERMINISTIC = "predicate.deterministic"
# Compared fields that are consequences of execution rather than causes of it.
_EXECUTION_RESULTS = (f"{_DETERMINISTIC}.outputs", f"{_DETERMINISTIC}.op_trace")


@dataclass(frozen=True)
class FieldDifference:
    """A compared field (by path) whose value differs between the two traces. For lists of
    different lengths the whole list is reported at the list's path."""

    path: str
    left: Any
    right: Any

    @property
    def upstream(self) -> bool:
        """True for fields fixed before execution (job, program, compiler, graph, binary,
        inputs): a difference there explains any later divergence."""
        return not self.path.startswith(_EXECUTION_RESULTS)


@dataclass(frozen=True)
class InstructionDivergence:
    """The first schedule position where the op-level traces differ.

    `left`/`right` are the records at `index` (None when that trace is shorter); the proofs
    show each record's digest at `index` under the respective signed Merkle root.
    """

    index: int
    left: InstructionRecord | None
    right: InstructionRecord | None
    left_proof: InclusionProof | None
    right_proof: InclusionProof | None

    def _record(self) -> InstructionRecord:
        record = self.left if self.left is not None else self.right
        if record is None:  # never built so: one side always exists at a divergence
            raise AttestError("an instruction divergence without any record")
        return record

    @property
    def name(self) -> str:
        """Instruction name (the left one when both exist)."""
        return self._record().name

    @property
    def opcode(self) -> str:
        """Opcode (the left one when both exist)."""
        return self._record().opcode

    @property
    def left_digest(self) -> str | None:
        return None if self.left is None else self.left.digest

    @property
    def right_digest(self) -> str | None:
        return None if self.right is None else self.right.digest


@dataclass(frozen=True)
class Divergence:
    """Result of comparing two traces (see `first_divergence`)."""

    differences: tuple[FieldDifference, ...]
    op_level: bool
    first_instruction: InstructionDivergence | None

    @property
    def identical(self) -> bool:
        """True when the compared parts agree."""
        return not self.differences and self.first_instruction is None

    @property
    def upstream_differences(self) -> tuple[FieldDifference, ...]:
        """Differences fixed before execution (see `FieldDifference.upstream`)."""
        return tuple(d for d in self.differences if d.upstream)

    def summary(self) -> str:
        """One human-readable paragraph saying where the traces part."""
        if self.identical:
            return "the traces agree on every compared field"
        lines = []
        upstream = self.upstream_differences
        if upstream:
            lines.append(
                "they differ before execution: "
                + ", ".join(d.path.removeprefix("predicate.") for d in upstream)
            )
        first = self.first_instruction
        if first is not None:
            lines.append(
                f"first differing instruction: index {first.index} ({first.name}, {first.opcode}): "
                f"left {first.left_digest or 'absent'}, right {first.right_digest or 'absent'}"
            )
        elif not self.op_level:
            lines.append("no op-level data in both traces, so no first instruction can be named")
        later = [d.path.removeprefix("predicate.") for d in self.differences if not d.upstream]
        if later:
            lines.append("results differ: " + ", ".join(later))
        return "; ".join(lines)


def _compare(left: Any, right: Any, path: str) -> Iterator[FieldDifference]:
    if isinstance(left, dict) and isinstance(right, dict) and list(left) == list(right):
        for key in left:
            yield from _compare(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from _compare(a, b, f"{path}[{i}]")
    elif left != right:
        yield FieldDifference(path=path, left=left, right=right)


def _first_instruction(left: OpTrace, right: OpTrace) -> InstructionDivergence | None:
    for index in range(max(len(left.instructions), len(right.instructions))):
        a = left.instructions[index] if index < len(left.instructions) else None
        b = right.instructions[index] if index < len(right.instructions) else None
        if a != b:
            return InstructionDivergence(
                index=index,
                left=a,
                right=b,
                left_proof=None
                if a is None
                else inclusion_proof(digest_leaves(left.digests), index),
                right_proof=None
                if b is None
                else inclusion_proof(digest_leaves(right.digests), index),
            )
    return None


def first_divergence(left: Statement, right: Statement) -> Divergence:
    """Compare two (verified) statements of the same job.

    Reports every differing compared field except the per-instruction list (job binding,
    program, compiler identity, graph/binary hashes, inputs, outputs, Merkle root), and,
    when both traces carry op-level data, the first instruction (schedule index, name,
    opcode, both digests) whose record differs, with inclusion proofs against both roots.
    Key ids and run metadata (threads, timings) are never compared.
    """
    a, b = left.predicate.compared_dict(), right.predicate.compared_dict()
    a_trace, b_trace = left.predicate.deterministic.op_trace, right.predicate.deterministic.op_trace
    # The instruction lists are handled by the instruction search; keep only their roots here.
    for data in (a, b):
        trace = data["deterministic"]["op_trace"]
        if trace is not None:
            data["deterministic"]["op_trace"] = {"merkle_root": trace["merkle_root"]}
    differences = tuple(_compare(a, b, "predicate"))
    op_level = a_trace is not None and b_trace is not None
    first = (
        _first_instruction(a_trace, b_trace)
        if a_trace is not None and b_trace is not None
        else None
    )
    return Divergence(differences=differences, op_level=op_level, first_instruction=first)
