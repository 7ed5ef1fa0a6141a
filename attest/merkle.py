"""Binary Merkle trees over per-instruction digests, with inclusion proofs.

Hashing rule (domain-separated so a leaf can never be taken for an inner node):

    leaf hash  = SHA-256(0x00 || leaf bytes)
    node hash  = SHA-256(0x01 || left hash || right hash)     (hashes as raw 32 bytes)

The tree is built level by level, pairing neighbours left to right in the given order (the
schedule order for traces). When a level has an odd number of hashes, the last one is
*promoted* unchanged to the next level (it is not duplicated: duplication would give
``[a, b, c]`` and ``[a, b, c, c]`` the same root). The root of a one-leaf tree is that
leaf's hash. The root of the empty tree is SHA-256 of the empty string.

Leaves are byte strings; a trace's leaves are the 32 raw bytes of each instruction's output
digest (see `digest_leaves`). All hashes are lower-case hex, like every vxla digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from attest.errors import MerkleError

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _raw(hex_hash: str, what: str) -> bytes:
    if not isinstance(hex_hash, str) or not _HEX64.fullmatch(hex_hash):
        raise MerkleError(f"{what}: expected 64 lower-case hex characters, got {hex_hash!r}")
    return bytes.fromhex(hex_hash)


def leaf_hash(leaf: bytes) -> str:
    """Hash of one leaf: SHA-256(0x00 || leaf)."""
    return raw_leaf_hash(leaf).hex()


def raw_leaf_hash(leaf: bytes | memoryview) -> bytes:
    """leaf_hash as 32 raw bytes; `leaf` may be a memoryview, hashed in place."""
    hasher = hashlib.sha256(LEAF_PREFIX)
    hasher.update(leaf)
    return hasher.digest()


def node_hash(left: str, right: str) -> str:
    """Hash of an inner node from its children's hex hashes: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(NODE_PREFIX + _raw(left, "left") + _raw(right, "right")).hexdigest()


def digest_leaves(digests: Sequence[str]) -> list[bytes]:
    """The leaves of a trace: the raw 32 bytes of each hex digest, in the given order."""
    return [_raw(d, f"digests[{i}]") for i, d in enumerate(digests)]


def _next_level(level: Sequence[bytes]) -> list[bytes]:
    """The level above `level` (raw 32-byte hashes): neighbours paired left to right."""
    sha256 = hashlib.sha256
    paired = [
        sha256(NODE_PREFIX + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
    ]
    if len(level) % 2:
        paired.append(level[-1])  # odd one out is promoted unchanged
    return paired


def root_of_leaf_hashes(level: Sequence[bytes]) -> bytes:
    """The root, as 32 raw bytes, of the tree whose leaf hashes (raw_leaf_hash, in order) are
    `level`; the raw EMPTY_ROOT for none. The one tree builder: merkle_root and the chunk
    root of a tensor digest (attest.digests) both build their levels here."""
    if not level:
        return bytes.fromhex(EMPTY_ROOT)
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def merkle_root(leaves: Sequence[bytes]) -> str:
    """Root of the tree over `leaves` in the given order (EMPTY_ROOT for no leaves)."""
    return root_of_leaf_hashes([raw_leaf_hash(leaf) for leaf in leaves]).hex()


@dataclass(frozen=True)
class InclusionProof:
    """Proof that the leaf at `index` is in a tree of `leaf_count` leaves.

    `siblings` are the sibling hashes from the leaf level up; levels where the path node was
    promoted (no sibling) contribute nothing, which the verifier recomputes from the index
    and the leaf count.
    """

    index: int
    leaf_count: int
    siblings: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON form: {"index", "leaf_count", "siblings"}."""
        return {"index": self.index, "leaf_count": self.leaf_count, "siblings": list(self.siblings)}


def inclusion_proof(leaves: Sequence[bytes], index: int) -> InclusionProof:
    """The inclusion proof of leaf `index` in the tree over `leaves`."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(leaves):
        raise MerkleError(f"index: {index!r} is not in 0..{len(leaves) - 1}")
    level = [raw_leaf_hash(leaf) for leaf in leaves]
    position = index
    siblings: list[str] = []
    while len(level) > 1:
        promoted = position == len(level) - 1 and len(level) % 2 == 1
        if not promoted:
            siblings.append(level[position ^ 1].hex())
        level = _next_level(level)
        position //= 2
    return InclusionProof(index=index, leaf_count=len(leaves), siblings=tuple(siblings))


def root_from_proof(leaf: bytes, proof: InclusionProof) -> str:
    """The root implied by `leaf` and `proof`; raises MerkleError if the proof's shape does
    not fit its index and leaf count (wrong number of siblings, index out of range)."""
    index, count = proof.index, proof.leaf_count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise MerkleError(f"proof.leaf_count: expected a positive integer, got {count!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise MerkleError(f"proof.index: {index!r} is not in 0..{count - 1}")
    current = leaf_hash(leaf)
    position, size, used = index, count, 0
    while size > 1:
        promoted = position == size - 1 and size % 2 == 1
        if not promoted:
            if used >= len(proof.siblings):
                raise MerkleError(
                    f"proof.siblings: too few ({len(proof.siblings)}) for index {index} of {count}"
                )
            sibling = proof.siblings[used]
            _raw(sibling, f"proof.siblings[{used}]")
            used += 1
            current = (
                node_hash(current, sibling) if position % 2 == 0 else node_hash(sibling, current)
            )
        position //= 2
        size = (size + 1) // 2
    if used != len(proof.siblings):
        raise MerkleError(
            f"proof.siblings: {len(proof.siblings)} given, {used} expected for index {index} of {count}"
        )
    return current


def verify_inclusion(
    leaf: bytes, proof: InclusionProof, root: str, *, leaf_count: int | None = None
) -> bool:
    """True when `proof` shows `leaf` at `proof.index` of a tree with root `root`.

    The root binds the leaf and its path, but a path can fit more than one tree size (leaf 0
    of 3 and leaf 0 of 4 have the same shape), so pass `leaf_count` from a trusted source
    (the signed statement's instruction count) to pin it. A malformed proof (wrong sibling
    count, bad hex, index out of range) gives False, not an exception: to a verifier it is
    just a proof that does not verify.
    """
    if leaf_count is not None and proof.leaf_count != leaf_count:
        return False
    try:
        return root_from_proof(leaf, proof) == root
    except MerkleError:
        return False
