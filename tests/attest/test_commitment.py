"""The dispute commitments (docs/disputes.md): roots, commitment proofs of every position for
trees of every shape the contract meets, and the bisection walk against a direct scan and
attest.divergence."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import EMPTY_ROOT, MerkleError, OpTrace, Statement, first_divergence, inclusion_proof
from attest.commitment import (
    TreeLevels,
    commitment_proof,
    commitment_root,
    descend_promoted,
    exec_root,
    first_divergence_walk,
    level_sizes,
    path_moves,
    root_from_commitment_proof,
)
from attest.merkle import digest_leaves, leaf_hash, merkle_root, node_hash
from tests.attest.traces import make_predicate, node_key

SIZES = (0, 1, 2, 3, 5, 8, 13)


def digests(count: int, tag: str = "leaf") -> list[bytes]:
    return [hashlib.sha256(f"{tag} {i}".encode()).digest() for i in range(count)]


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


TOP = b"result digest or result record leaf"


# --- roots ----------------------------------------------------------------------------------


def test_commitment_root_is_the_tree_of_the_leaves_beside_the_top_leaf() -> None:
    a, b, c = digests(3)
    inner = sha(b"\x01" + sha(b"\x01" + sha(b"\x00" + a) + sha(b"\x00" + b)) + sha(b"\x00" + c))
    assert commitment_root([a, b, c], TOP) == sha(b"\x01" + inner + sha(b"\x00" + TOP)).hex()
    # No leaves: the empty root (SHA-256 of nothing) beside the top leaf.
    assert commitment_root([], TOP) == node_hash(EMPTY_ROOT, leaf_hash(TOP))
    assert hashlib.sha256(b"").hexdigest() == EMPTY_ROOT


def test_exec_root_is_the_commitment_of_the_signed_trace_and_the_result() -> None:
    trace = OpTrace.from_instructions([(f"op.{i}", "add", d.hex()) for i, d in enumerate(digests(5))])
    result = hashlib.sha256(b"outputs").hexdigest()
    assert exec_root(trace.merkle_root, result) == commitment_root(digest_leaves(trace.digests), bytes.fromhex(result))
    assert exec_root(trace.merkle_root, result) != exec_root(trace.merkle_root, hashlib.sha256(b"other").hexdigest())


@pytest.mark.parametrize("bad", ["AB" * 32, "ab" * 31, "zz" * 32, 7])
def test_exec_root_takes_only_vxla_hashes(bad: object) -> None:
    good = hashlib.sha256(b"x").hexdigest()
    with pytest.raises(MerkleError):
        exec_root(bad, good)  # type: ignore[arg-type]
    with pytest.raises(MerkleError):
        exec_root(good, bad)  # type: ignore[arg-type]


# --- commitment proofs ---------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_every_position_proves_against_the_root(n: int) -> None:
    # Leaves of several lengths: graph leaves carry a tail of 4-byte operand indices.
    leaves = [d + bytes(4 * (i % 3)) for i, d in enumerate(digests(n))]
    root = commitment_root(leaves, TOP)
    for index in range(n + 1):
        leaf = leaves[index] if index < n else TOP
        proof = commitment_proof(leaves, TOP, index)
        assert root_from_commitment_proof(leaf, index, n, proof) == root, (n, index)
        if index < n:
            assert proof == [*inclusion_proof(leaves, index).siblings, leaf_hash(TOP)]
            assert len(proof) == path_moves(index, n) + 1
        else:
            assert proof == [merkle_root(leaves)]
        # Another leaf, or the right leaf at another position, gives another root.
        assert root_from_commitment_proof(leaf + b"!", index, n, proof) != root
        if index < n and n > 1:
            other = (index + 1) % n
            # (or the proof does not even have the other position's shape)
            with contextlib.suppress(MerkleError):
                assert root_from_commitment_proof(leaf, other, n, proof) != root


@pytest.mark.parametrize("n", SIZES)
def test_a_proof_of_the_wrong_shape_is_refused(n: int) -> None:
    leaves = digests(n)
    for index in range(n + 1):
        leaf = leaves[index] if index < n else TOP
        proof = commitment_proof(leaves, TOP, index)
        with pytest.raises(MerkleError):
            root_from_commitment_proof(leaf, index, n, [*proof, proof[-1]])
        with pytest.raises(MerkleError):
            root_from_commitment_proof(leaf, index, n, proof[:-1])
        with pytest.raises(MerkleError):
            root_from_commitment_proof(leaf, index, n, [*proof[:-1], "AB" * 32])
    with pytest.raises(MerkleError):
        root_from_commitment_proof(TOP, n + 1, n, [EMPTY_ROOT])
    with pytest.raises(MerkleError):
        root_from_commitment_proof(TOP, -1, n, [EMPTY_ROOT])
    with pytest.raises(MerkleError):
        commitment_proof(leaves, TOP, n + 1)


def test_the_top_leaf_of_no_leaves_is_proven_by_the_empty_root() -> None:
    assert commitment_proof([], TOP, 0) == [EMPTY_ROOT]
    assert root_from_commitment_proof(TOP, 0, 0, [EMPTY_ROOT]) == commitment_root([], TOP)


# --- tree levels and promoted nodes ----------------------------------------------------------


@pytest.mark.parametrize("n", range(0, 40))
def test_tree_levels_hold_the_merkle_tree(n: int) -> None:
    leaves = digests(n)
    tree = TreeLevels(leaves)
    assert tree.n == n and tree.sizes == level_sizes(n) and tree.root == merkle_root(leaves)
    assert tree.top == len(tree.sizes) - 1
    for level in range(1, len(tree.sizes)):
        for position in range(tree.sizes[level]):
            below = tree.sizes[level - 1]
            if tree.is_promoted(level, position):
                assert position == tree.sizes[level] - 1 and below % 2 == 1
                assert tree.node(level, position) == tree.node(level - 1, 2 * position)
                with pytest.raises(MerkleError):
                    tree.children(level, position)
            else:
                assert tree.node(level, position) == node_hash(*tree.children(level, position))
    assert not any(tree.is_promoted(0, p) for p in range(n))
    if n:
        assert (tree.top, 0) == descend_promoted(tree.top, 0, n)  # the root is never promoted


def test_promoted_chains_are_skipped_down_to_a_leaf_or_a_fork() -> None:
    # 5 leaves: sizes 5, 3, 2, 1; node (2, 1) has the single child (1, 2), which has the
    # single child leaf 4.
    assert level_sizes(5) == (5, 3, 2, 1)
    assert descend_promoted(2, 1, 5) == (0, 4)
    assert descend_promoted(1, 2, 5) == (0, 4)
    assert descend_promoted(2, 0, 5) == (2, 0)
    assert descend_promoted(0, 3, 5) == (0, 3)
    # 13 leaves: sizes 13, 7, 4, 2, 1; (2, 3) has the single child (1, 6), which has the
    # single child leaf 12; (3, 1) has two children (4 is even).
    assert level_sizes(13) == (13, 7, 4, 2, 1)
    assert descend_promoted(2, 3, 13) == (0, 12)
    assert descend_promoted(3, 1, 13) == (3, 1)
    with pytest.raises(MerkleError):
        descend_promoted(4, 1, 13)
    assert [path_moves(i, 5) for i in range(5)] == [3, 3, 3, 3, 1]
    assert path_moves(12, 13) == 2
    assert path_moves(0, 1) == 0


@pytest.mark.parametrize("n", range(1, 70))
def test_moves_are_the_siblings_of_the_inclusion_proof(n: int) -> None:
    leaves = digests(n)
    assert [path_moves(i, n) for i in range(n)] == [len(inclusion_proof(leaves, i).siblings) for i in range(n)]


# --- the walk -------------------------------------------------------------------------------

VALUES = [hashlib.sha256(bytes([v])).digest() for v in range(4)]


@st.composite
def two_leaf_lists(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    """Two leaf lists of one length 1..70 that differ somewhere; leaves from a few values, so
    equal subtrees (and equal hashes at different positions) are common."""
    n = draw(st.integers(1, 70))
    mine = draw(st.lists(st.sampled_from(VALUES), min_size=n, max_size=n))
    changed = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    theirs = list(mine)
    for index in changed:
        theirs[index] = VALUES[(VALUES.index(mine[index]) + draw(st.integers(1, 3))) % 4]
    return mine, theirs


def direct_scan(mine: list[bytes], theirs: list[bytes]) -> int:
    return next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b)


@settings(max_examples=400, deadline=None)
@given(two_leaf_lists())
def test_the_walk_ends_at_the_first_differing_leaf(lists: tuple[list[bytes], list[bytes]]) -> None:
    mine, theirs = lists
    a, b = TreeLevels(mine), TreeLevels(theirs)
    index, moves = first_divergence_walk(a, b)
    assert index == direct_scan(mine, theirs)
    assert first_divergence_walk(b, a)[0] == index  # who defends does not matter
    assert len(moves) == path_moves(index, len(mine))
    for level, position in moves:  # a move only where both sides hold different hashes
        assert a.node(level, position) != b.node(level, position)
        assert not a.is_promoted(level, position)


def statement(leaves: list[bytes]) -> Statement:
    predicate = make_predicate(node_key("node-a"))
    trace = OpTrace.from_instructions([(f"op.{i}", "add", leaf.hex()) for i, leaf in enumerate(leaves)])
    return Statement.build(replace(predicate, deterministic=replace(predicate.deterministic, op_trace=trace)))


@settings(max_examples=60, deadline=None)
@given(two_leaf_lists())
def test_the_walk_agrees_with_attest_divergence(lists: tuple[list[bytes], list[bytes]]) -> None:
    mine, theirs = lists
    first = first_divergence(statement(mine), statement(theirs)).first_instruction
    assert first is not None
    assert first_divergence_walk(TreeLevels(mine), TreeLevels(theirs))[0] == first.index


def test_the_walk_needs_two_different_trees_of_one_size() -> None:
    with pytest.raises(MerkleError):
        first_divergence_walk(TreeLevels(digests(3)), TreeLevels(digests(3)))
    with pytest.raises(MerkleError):
        first_divergence_walk(TreeLevels(digests(3)), TreeLevels(digests(4)))
    with pytest.raises(MerkleError):
        first_divergence_walk(TreeLevels([]), TreeLevels([]))


def test_a_walk_by_hand() -> None:
    # 5 leaves differing at 1 and 4: the root's left children differ, then (2, 0)'s, then
    # (1, 0)'s right child: leaf 1 after three moves.
    mine = digests(5)
    theirs = [mine[0], b"x", mine[2], mine[3], b"y"]
    assert first_divergence_walk(TreeLevels(mine), TreeLevels(theirs)) == (1, [(3, 0), (2, 0), (1, 0)])
    # Differing only at 4: right at the root, then promoted (2, 1) and (1, 2) without a move.
    theirs = [*mine[:4], b"y"]
    assert first_divergence_walk(TreeLevels(mine), TreeLevels(theirs)) == (4, [(3, 0)])
