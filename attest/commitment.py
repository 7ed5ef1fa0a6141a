"""The commitments a dispute walks (docs/disputes.md): the graph commitment posted with a job
and the execution commitment of every reveal, their proofs, and the bisection walk.

Both commitments are one tree shape: the n-leaf tree of attest/merkle.py (an odd last node
promoted unchanged) under a root that also holds one top leaf,

    commitment root = node(merkle_root(leaves 0..n-1), leaf(top leaf))

For the graph the leaves are the graph leaves of the n op-trace records and the top leaf the
result record's graph leaf; for an execution the leaves are the raw 32-byte op-trace digests
(so merkle_root(leaves) is the signed `op_trace.merkle_root`) and the top leaf the raw result
digest. Positions 0..n of the commitment are leaves 0..n-1 and the top leaf n.

The contract implements the same functions (`root_from_commitment_proof` and the walk): this
module is their reference, which the tests hold against attest.merkle and a direct scan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attest.errors import MerkleError
from attest.merkle import (
    InclusionProof,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    node_hash,
    root_from_proof,
)

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _hex(value: object, what: str) -> str:
    """`value` when it is a hash as vxla writes them (64 lower-case hex), else MerkleError."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise MerkleError(f"{what}: expected 64 lower-case hex characters, got {value!r}")
    return value


def exec_root(op_trace_root_hex: str, result_digest_hex: str) -> str:
    """The execution commitment of a reveal: node(opTraceRoot, leaf(raw result digest))."""
    top = bytes.fromhex(_hex(result_digest_hex, "result_digest"))
    return node_hash(_hex(op_trace_root_hex, "op_trace_root"), leaf_hash(top))


def commitment_root(leaves: Sequence[bytes], top_leaf: bytes) -> str:
    """node(merkle_root(leaves), leaf(top_leaf)): the graph commitment (graph leaves, result
    record's graph leaf) or the execution commitment (raw op-trace digests, raw result
    digest)."""
    return node_hash(merkle_root(leaves), leaf_hash(top_leaf))


def commitment_proof(leaves: Sequence[bytes], top_leaf: bytes, index: int) -> list[str]:
    """The proof of position `index` (0..n) of a commitment: for index < n the siblings of
    leaf `index` in the n-leaf tree from the leaf up (promoted levels contribute nothing: the
    siblings of attest.merkle.inclusion_proof), then leaf(top_leaf); for index n the single
    sibling merkle_root(leaves)."""
    count = len(leaves)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= count:
        raise MerkleError(f"index: {index!r} is not in 0..{count}")
    if index == count:
        return [merkle_root(leaves)]
    return [*inclusion_proof(leaves, index).siblings, leaf_hash(top_leaf)]


def root_from_commitment_proof(leaf: bytes, index: int, n: int, siblings: Sequence[str]) -> str:
    """The commitment root implied by `leaf` at position `index` (0..n) of a commitment over
    n leaves and a top leaf, with `siblings` as `commitment_proof` makes them. Raises
    MerkleError when the proof's shape does not fit the index and n."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise MerkleError(f"n: expected a non-negative integer, got {n!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= n:
        raise MerkleError(f"index: {index!r} is not in 0..{n}")
    if not siblings:
        raise MerkleError(f"siblings: none given for index {index} of {n}")
    if index == n:
        if len(siblings) != 1:
            raise MerkleError(f"siblings: {len(siblings)} given, 1 expected for the top leaf {n}")
        return node_hash(_hex(siblings[0], "siblings[0]"), leaf_hash(leaf))
    inner = root_from_proof(
        leaf, InclusionProof(index=index, leaf_count=n, siblings=tuple(siblings[:-1]))
    )
    return node_hash(inner, _hex(siblings[-1], f"siblings[{len(siblings) - 1}]"))


def level_sizes(n: int) -> tuple[int, ...]:
    """The number of nodes of each level of an n-leaf tree, from the leaves (level 0) up to
    the root (size 1); () for no leaves."""
    if n < 0:
        raise MerkleError(f"n: expected a non-negative integer, got {n!r}")
    sizes: list[int] = []
    size = n
    while size > 0:
        sizes.append(size)
        if size == 1:
            break
        size = (size + 1) // 2
    return tuple(sizes)


def _promoted(sizes: Sequence[int], level: int, position: int) -> bool:
    return level > 0 and position == sizes[level] - 1 and sizes[level - 1] % 2 == 1


def descend_promoted(level: int, position: int, n: int) -> tuple[int, int]:
    """From node (level, position) of an n-leaf tree, down through promoted nodes (a node with
    a single child, equal to it) to the first node that is a leaf or has two children: the
    walk skips promoted nodes without a move, since both sides' hashes there are their
    child's."""
    sizes = level_sizes(n)
    if not 0 <= level < len(sizes) or not 0 <= position < sizes[level]:
        raise MerkleError(f"node ({level}, {position}) is not in a tree of {n} leaves")
    while _promoted(sizes, level, position):
        level, position = level - 1, 2 * position
    return level, position


def path_moves(index: int, n: int) -> int:
    """The moves the walk makes to reach leaf `index` of an n-leaf tree: the nodes with two
    children on its path (= the siblings of its inclusion proof), what the gas of a dispute
    grows with."""
    if not 0 <= index < n:
        raise MerkleError(f"index: {index!r} is not in 0..{n - 1}")
    sizes = level_sizes(n)
    moves, position = 0, index
    for level in range(1, len(sizes)):
        position //= 2
        if not _promoted(sizes, level, position):
            moves += 1
    return moves


def _parents(level: list[str]) -> list[str]:
    """The level above `level`: neighbours paired left to right, an odd last one promoted."""
    paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    return paired + level[-1:] if len(level) % 2 else paired


class TreeLevels:
    """Every level's hashes of the n-leaf tree over `leaves` (attest/merkle.py): what one side
    of a dispute holds to answer the walk's moves."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.levels: list[list[str]] = []
        level = [leaf_hash(leaf) for leaf in leaves]
        while level:
            self.levels.append(level)
            if len(level) == 1:
                break
            level = _parents(level)

    @property
    def n(self) -> int:
        """The number of leaves."""
        return len(self.levels[0]) if self.levels else 0

    @property
    def sizes(self) -> tuple[int, ...]:
        """Level sizes from the leaves up (level_sizes(n))."""
        return tuple(len(level) for level in self.levels)

    @property
    def top(self) -> int:
        """The root's level (-1 for no leaves)."""
        return len(self.levels) - 1

    @property
    def root(self) -> str:
        """merkle_root of the leaves (EMPTY_ROOT for none)."""
        return self.levels[-1][0] if self.levels else merkle_root([])

    def node(self, level: int, position: int) -> str:
        """The hash at (level, position); level 0 holds the leaf hashes."""
        return self.levels[level][position]

    def is_promoted(self, level: int, position: int) -> bool:
        """Whether the node has a single child (the last node of a level over an odd one)."""
        return _promoted(self.sizes, level, position)

    def children(self, level: int, position: int) -> tuple[str, str]:
        """The two children's hashes of a node with two children (what `bisect` posts)."""
        if level < 1 or self.is_promoted(level, position):
            raise MerkleError(f"node ({level}, {position}) has no two children")
        below = self.levels[level - 1]
        return below[2 * position], below[2 * position + 1]


def first_divergence_walk(
    mine: TreeLevels, theirs: TreeLevels
) -> tuple[int, list[tuple[int, int]]]:
    """The bisection of docs/disputes.md, "The game" step 2, over two trees of n leaves with
    different roots: from the root, skip promoted nodes; at a node with two children compare
    the left children, go left when they differ, else right; stop at a leaf. Returns the leaf
    index (the first where the leaf lists differ: every left subtree passed by is equal) and
    the (level, position) of every node where a move was needed."""
    if mine.n != theirs.n or mine.n == 0:
        raise MerkleError(
            f"the walk needs two trees of the same positive size, not {mine.n} and {theirs.n}"
        )
    if mine.root == theirs.root:
        raise MerkleError("the roots agree: nothing to walk")
    level, position = mine.top, 0
    moves: list[tuple[int, int]] = []
    while True:
        level, position = descend_promoted(level, position, mine.n)
        if level == 0:
            return position, moves
        moves.append((level, position))
        left_mine, _ = mine.children(level, position)
        left_theirs, _ = theirs.children(level, position)
        level, position = level - 1, 2 * position + (0 if left_mine != left_theirs else 1)
