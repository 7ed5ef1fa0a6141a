"""Element proofs: any one element of a tensor proved against the tensor's `vxla.tensor.v2`
digest (attest/digests.py, docs/numerics.md section 9) with its chunk and the chunk's
siblings in the tree of attest/merkle.py, short enough for a contract to check.

A proof of the element at flat index i (row-major, byte offset i * w in the canonical bytes,
w its width) holds the digest's header, the index of the chunk that holds the element and
the chunk count, the chunk's bytes, the sibling hashes from the chunk's leaf up (promoted
levels contribute nothing), the element's byte offset inside the chunk and its width. The
verifier recomputes

    root   = the root implied by the chunk (leaf SHA-256(0x00 || chunk)) and the siblings
    digest = SHA-256(header || root)

and compares it with the digest it trusts; the header fixes the element type and dimensions,
hence the width, the chunk count and every chunk's length, which the verifier derives
itself rather than trusting the proof's. A complex element is its whole value (real then
imaginary part, 8 or 16 bytes); an element of s2, s4, u2 or u4 is the byte that holds it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from attest.commitment import TreeLevels
from attest.digests import (
    CHUNK_BYTES,
    ELEMENT_WIDTHS,
    TENSOR_DIGEST_V2,
    canonical_tensor_bytes,
    chunks,
    element_type_name,
    sha256_hex,
    tensor_header,
)
from attest.errors import ElementProofError, MerkleError
from attest.merkle import InclusionProof, inclusion_proof, root_from_proof

_HEADER = re.compile(rb"(vxla\.tensor\.v[0-9]+)\n([a-z0-9]+)\[([0-9,]*)\]\n")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ElementProof:
    """Proof of one element of a tensor against its v2 digest (the module docstring)."""

    header: bytes
    chunk_index: int
    chunk_count: int
    chunk: bytes
    siblings: tuple[str, ...]
    offset: int  # the element's first byte inside `chunk`
    width: int  # bytes of one element

    @property
    def flat_index(self) -> int:
        """The element's row-major index in the tensor."""
        return (self.chunk_index * CHUNK_BYTES + self.offset) // self.width

    def to_dict(self) -> dict[str, object]:
        """JSON form: bytes as lower-case hex, the header as text."""
        return {
            "header": self.header.decode(),
            "chunk_index": self.chunk_index,
            "chunk_count": self.chunk_count,
            "chunk": self.chunk.hex(),
            "siblings": list(self.siblings),
            "offset": self.offset,
            "width": self.width,
        }


def element_proof(array: np.ndarray, flat_index: int) -> ElementProof:
    """The proof of element `flat_index` (row-major) of `array` against
    tensor_digest(array) (version vxla.tensor.v2). ElementProofError when the index is not
    one of the array's."""
    return chunk_tree(array).proof(flat_index)


@dataclass(frozen=True)
class ChunkTree:
    """A tensor's v2 digest opened: its header and every level of its chunk tree (what a party
    to a dispute holds to locate, by bisection, a chunk where two outputs differ, and to
    reveal it)."""

    header: bytes
    chunks: tuple[bytes, ...]
    levels: TreeLevels

    @property
    def root(self) -> bytes:
        """The chunk tree's root: digest = SHA-256(header || root)."""
        return bytes.fromhex(self.levels.root)

    @property
    def width(self) -> int:
        """Bytes of one element."""
        return _header_layout(self.header)[0]

    @property
    def size(self) -> int:
        """The tensor's element count."""
        width, total = _header_layout(self.header)
        return total // width

    def proof(self, flat_index: int) -> ElementProof:
        """The proof of element `flat_index` (row-major) against the digest; ElementProofError
        when the index is not one of the tensor's."""
        if isinstance(flat_index, bool) or not isinstance(flat_index, int | np.integer):
            raise ElementProofError(f"flat_index: expected an integer, got {flat_index!r}")
        if not 0 <= flat_index < self.size:
            raise ElementProofError(f"flat_index: {flat_index} is not in 0..{self.size - 1}")
        width = self.width
        start = int(flat_index) * width
        index = start // CHUNK_BYTES
        return ElementProof(
            header=self.header,
            chunk_index=index,
            chunk_count=len(self.chunks),
            chunk=self.chunks[index],
            siblings=inclusion_proof(self.chunks, index).siblings,
            offset=start - index * CHUNK_BYTES,
            width=width,
        )

    def first_difference(self, chunk_index: int, theirs: bytes) -> int | None:
        """The flat index of the first element of chunk `chunk_index` whose bytes differ from
        those of `theirs` (another tensor's chunk at the same place), None when none does."""
        mine, width = self.chunks[chunk_index], self.width
        for offset in range(0, len(mine), width):
            if mine[offset : offset + width] != theirs[offset : offset + width]:
                return (chunk_index * CHUNK_BYTES + offset) // width
        return None


def chunk_tree(array: np.ndarray) -> ChunkTree:
    """The chunk tree of tensor_digest(array) (version vxla.tensor.v2)."""
    array = np.asarray(array)
    leaves = tuple(bytes(c) for c in chunks(canonical_tensor_bytes(array)))
    header = tensor_header(TENSOR_DIGEST_V2, element_type_name(array.dtype), tuple(array.shape))
    return ChunkTree(header, leaves, TreeLevels(leaves))


def _header_layout(header: bytes) -> tuple[int, int]:
    """(element width, total canonical bytes) of a v2 header; ElementProofError when it is not
    one, as tensor_header writes it."""
    match = _HEADER.fullmatch(header) if isinstance(header, bytes) else None
    if match is None:
        raise ElementProofError(f"header: not a tensor digest header: {header!r}")
    version, type_name, dims_text = (part.decode() for part in match.groups())
    if version != TENSOR_DIGEST_V2:
        raise ElementProofError(
            f"header: element proofs are of {TENSOR_DIGEST_V2} digests, not {version}"
        )
    if type_name not in ELEMENT_WIDTHS:
        raise ElementProofError(f"header: unknown element type {type_name!r}")
    dims = tuple(int(d) for d in dims_text.split(",")) if dims_text else ()
    if tensor_header(version, type_name, dims) != header:
        raise ElementProofError(f"header: not in canonical form: {header!r}")
    width = ELEMENT_WIDTHS[type_name]
    return width, width * math.prod(dims)


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ElementProofError(f"{what}: expected an integer, got {value!r}")
    return value


def verify_element_proof(
    digest_hex: str, proof: ElementProof, *, flat_index: int | None = None
) -> bytes:
    """The element's canonical bytes (`proof.width` of them, little-endian, a NaN canonical)
    when `proof` shows them at `proof.flat_index` (or at `flat_index`, when given) of the
    tensor whose v2 digest is `digest_hex`; ElementProofError naming what failed otherwise."""
    if not isinstance(digest_hex, str) or not _HEX64.fullmatch(digest_hex):
        raise ElementProofError(
            f"digest: expected 64 lower-case hex characters, got {digest_hex!r}"
        )
    width, total = _header_layout(proof.header)
    count = -(-total // CHUNK_BYTES)
    index = _integer(proof.chunk_index, "chunk_index")
    offset = _integer(proof.offset, "offset")
    if _integer(proof.width, "width") != width:
        raise ElementProofError(
            f"width: {proof.width}, the header's element type has {width} bytes"
        )
    if _integer(proof.chunk_count, "chunk_count") != count:
        raise ElementProofError(
            f"chunk_count: {proof.chunk_count}, the header's tensor has {count} chunks"
        )
    if not 0 <= index < count:
        raise ElementProofError(f"chunk_index: {index} is not in 0..{count - 1}")
    if not isinstance(proof.chunk, bytes):
        raise ElementProofError(f"chunk: expected bytes, got {type(proof.chunk).__name__}")
    length = min(CHUNK_BYTES, total - index * CHUNK_BYTES)
    if len(proof.chunk) != length:
        raise ElementProofError(
            f"chunk: {len(proof.chunk)} bytes, chunk {index} of the header's tensor has {length}"
        )
    if offset % width or not 0 <= offset <= length - width:
        raise ElementProofError(
            f"offset: {offset} is not the start of an element of {width} bytes in a chunk of {length}"
        )
    if not isinstance(proof.siblings, tuple | list):
        raise ElementProofError(
            f"siblings: expected a sequence of hex hashes, got {proof.siblings!r}"
        )
    try:
        root = root_from_proof(
            proof.chunk,
            InclusionProof(index=index, leaf_count=count, siblings=tuple(proof.siblings)),
        )
    except MerkleError as error:
        raise ElementProofError(f"siblings: {error}") from None
    if sha256_hex(proof.header + bytes.fromhex(root)) != digest_hex:
        raise ElementProofError("the chunk, its siblings and the header do not give the digest")
    if flat_index is not None and proof.flat_index != flat_index:
        raise ElementProofError(
            f"flat_index: the proof is of element {proof.flat_index}, not {flat_index}"
        )
    return proof.chunk[offset : offset + width]
