"""What a party to a dispute under the step referee holds of the disputed instruction, as
data (contracts/src/StepReferee.sol, docs/disputes.md "Down to one scalar operation"): the
element program it claims, an element's values of the program's steps, and what resolving at
a step needs. node/chain/step_play.py makes the moves from an `InstructionHolding`; the
daemon's execution processes build one from the reference (node/daemon/step_holding.py)
without loading the chain client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from attest.commitment import TreeLevels
from attest.merkle import inclusion_proof
from attest.tensor_proof import ChunkTree, ElementProof


def siblings(hexes: tuple[str, ...] | list[str]) -> list[bytes]:
    """Sibling hashes as the contract takes them."""
    return [bytes.fromhex(h) for h in hexes]


@dataclass(frozen=True)
class ProgramClaim:
    """An instruction's element program, as its graph leaf binds it: the record's body digest,
    the program commitment's fields and its templates (the tree's leaves)."""

    record_body: bytes
    root: bytes
    result: int
    elements: int
    header_hash: bytes
    templates: tuple[bytes, ...]

    @property
    def steps(self) -> int:
        return len(self.templates)

    def argument(self) -> tuple:
        """StepReferee.Program."""
        return (self.root, self.steps, self.result, self.elements, self.header_hash)

    def template(self, step: int) -> tuple:
        """StepReferee.TemplateProof of step `step`."""
        return (self.templates[step], siblings(inclusion_proof(self.templates, step).siblings))


@dataclass(frozen=True)
class StepOpening:
    """What resolving at a step needs beyond the values: the steps its template names, a
    LOAD's element proof (and, for a part of a tuple-shaped operand, the digests of all its
    parts, which the contract hashes to the operand's tuple digest), a TABLE's entry with its
    proof."""

    arguments: tuple[int, ...]
    load: ElementProof | None = None
    entry: tuple[int, tuple[str, ...]] | None = None
    parts: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ElementValues:
    """A party's values of the program's steps for one output element, and the leaves of its
    values tree (one per step)."""

    element: int
    values: tuple[int, ...]
    leaves: tuple[bytes, ...]

    @property
    def tree(self) -> TreeLevels:
        return TreeLevels(self.leaves)

    def proof(self, step: int) -> tuple:
        """StepReferee.ValueProof of step `step`."""
        return (self.values[step], siblings(inclusion_proof(self.leaves, step).siblings))


class InstructionHolding(Protocol):
    """What one party holds of the disputed instruction."""

    record_body: bytes  # SHA-256 of the instruction's record JSON

    @property
    def program(self) -> ProgramClaim | None:
        """The element program (None: the instruction has none, the committee decides)."""
        ...

    @property
    def output(self) -> ChunkTree:
        """The party's output tensor of the instruction, opened."""
        ...

    def element(self, element: int) -> ElementValues:
        """The party's values of the steps of output element `element`."""
        ...

    def opening(self, element: int, step: int) -> StepOpening:
        """What resolving element `element` at step `step` needs."""
        ...
