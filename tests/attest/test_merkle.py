"""Merkle trees: the documented hashing rule, proofs for every leaf, tampering."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from attest import (
    EMPTY_ROOT,
    InclusionProof,
    MerkleError,
    digest_leaves,
    inclusion_proof,
    merkle_root,
    root_from_proof,
    verify_inclusion,
)


def leaves(count: int) -> list[bytes]:
    return [hashlib.sha256(f"leaf {i}".encode()).digest() for i in range(count)]


def h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def test_root_of_small_trees_follows_the_documented_rule() -> None:
    a, b, c, d, e = leaves(5)
    la, lb, lc, ld, le = (h(b"\x00" + x) for x in (a, b, c, d, e))
    ab = h(b"\x01" + la + lb)
    cd = h(b"\x01" + lc + ld)
    assert merkle_root([a]) == la.hex()
    assert merkle_root([a, b]) == ab.hex()
    # Three leaves: c is promoted unchanged to the next level, not duplicated.
    assert merkle_root([a, b, c]) == h(b"\x01" + ab + lc).hex()
    assert merkle_root([a, b, c, d]) == h(b"\x01" + ab + cd).hex()
    # Five leaves: e is promoted twice.
    assert merkle_root([a, b, c, d, e]) == h(b"\x01" + h(b"\x01" + ab + cd) + le).hex()
    assert merkle_root([]) == EMPTY_ROOT == hashlib.sha256(b"").hexdigest()


def test_promotion_does_not_collide_with_duplication() -> None:
    a, b, c = leaves(3)
    assert merkle_root([a, b, c]) != merkle_root([a, b, c, c])


def test_leaf_and_node_hashing_are_domain_separated() -> None:
    a, b = leaves(2)
    # A "leaf" equal to the concatenated children of the 2-leaf tree must not give its root.
    la, lb = h(b"\x00" + a), h(b"\x00" + b)
    assert merkle_root([la + lb]) != merkle_root([a, b])


def test_order_matters() -> None:
    a, b, c = leaves(3)
    assert merkle_root([a, b, c]) != merkle_root([b, a, c])


@pytest.mark.parametrize("size", range(1, 34))
def test_every_leaf_has_a_verifying_proof(size: int) -> None:
    items = leaves(size)
    root = merkle_root(items)
    for index in range(size):
        proof = inclusion_proof(items, index)
        assert proof.index == index and proof.leaf_count == size
        assert root_from_proof(items[index], proof) == root
        assert verify_inclusion(items[index], proof, root)
        # The proof is for this leaf and this position only.
        other = items[(index + 1) % size]
        if other != items[index]:
            assert not verify_inclusion(other, proof, root)
        if size > 1:
            moved = replace(proof, index=(index + 1) % size)
            assert not verify_inclusion(items[index], moved, root)


@pytest.mark.parametrize("size", [2, 3, 7, 8, 33])
def test_modified_leaf_or_proof_fails(size: int) -> None:
    items = leaves(size)
    root = merkle_root(items)
    for index in range(size):
        proof = inclusion_proof(items, index)
        tampered_leaf = bytes([items[index][0] ^ 1]) + items[index][1:]
        assert not verify_inclusion(tampered_leaf, proof, root)
        for s in range(len(proof.siblings)):
            siblings = list(proof.siblings)
            siblings[s] = ("0" if siblings[s][0] != "0" else "1") + siblings[s][1:]
            assert not verify_inclusion(
                items[index], replace(proof, siblings=tuple(siblings)), root
            )
        assert not verify_inclusion(
            items[index], replace(proof, siblings=proof.siblings[:-1]), root
        )
        assert not verify_inclusion(
            items[index], replace(proof, siblings=(*proof.siblings, root)), root
        )
        assert verify_inclusion(items[index], proof, root, leaf_count=size)
        assert not verify_inclusion(
            items[index], replace(proof, leaf_count=size + 1), root, leaf_count=size
        )
        assert not verify_inclusion(items[index], proof, root, leaf_count=size + 1)
    assert not verify_inclusion(items[0], inclusion_proof(items, 0), "0" * 64)


def test_malformed_proofs_are_rejected_with_a_reason() -> None:
    items = leaves(4)
    with pytest.raises(MerkleError, match="proof.index"):
        root_from_proof(items[0], InclusionProof(index=4, leaf_count=4, siblings=()))
    with pytest.raises(MerkleError, match="too few"):
        root_from_proof(items[0], InclusionProof(index=0, leaf_count=4, siblings=()))
    with pytest.raises(MerkleError, match=r"proof.siblings\[0\]"):
        root_from_proof(items[0], InclusionProof(index=0, leaf_count=2, siblings=("XYZ",)))
    with pytest.raises(MerkleError, match="index"):
        inclusion_proof(items, 4)
    assert not verify_inclusion(
        items[0], InclusionProof(index=0, leaf_count=0, siblings=()), merkle_root(items)
    )


def test_digest_leaves_are_raw_digest_bytes() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert digest_leaves([digest]) == [bytes.fromhex(digest)]
    with pytest.raises(MerkleError, match=r"digests\[1\]"):
        digest_leaves([digest, digest.upper()])
