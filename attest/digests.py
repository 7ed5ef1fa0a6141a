"""Canonical digests: the one place where vxla turns bytes, text and tensors into hashes.

All digests are lower-case hex SHA-256.

A tensor digest (docs/numerics.md section 9) is versioned; this module owns the versions and
the chunk size. `vxla.tensor.v2`, what everything new digests with, is SHA-256 over the
header `vxla.tensor.v2\n<type>[<dims>]\n` and the 32-byte root of the Merkle tree of
attest/merkle.py over the canonical bytes cut into CHUNK_BYTES chunks (the last may be
shorter; no chunk for an empty tensor, whose root is EMPTY_ROOT), so any one element can be
proved against the digest with its chunk and the chunk's siblings (attest/tensor_proof.py).
`vxla.tensor.v1`, the previous version, still accepted where an older trace names it, is
SHA-256 over the header `vxla.tensor.v1\n<type>[<dims>]\n` and the canonical bytes.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

import numpy as np

from attest.errors import DigestVersionError
from attest.merkle import raw_leaf_hash, root_of_leaf_hashes
from core.dtypes import ALL_DTYPES, FLOAT_DTYPES, FloatLayout

TENSOR_DIGEST_V1 = "vxla.tensor.v1"
TENSOR_DIGEST_V2 = "vxla.tensor.v2"
# Every version this vxla computes and verifies, oldest first.
TENSOR_DIGEST_VERSIONS = (TENSOR_DIGEST_V1, TENSOR_DIGEST_V2)
# The version everything new is digested with (traces, node records, graph commitments).
TENSOR_DIGEST_VERSION = TENSOR_DIGEST_V2
TUPLE_DIGEST_VERSION = "vxla.tuple.v1"

# The chunk of a v2 digest's tree: a whole number of elements of every type (widths 1, 2, 4,
# 8 and 16 bytes). Chosen by bench/tensor_digest.py: 4096 keeps digesting every intermediate
# of a traced run within about 1.5x of v1 on large tensors (1024: about 3x, the tree's Python
# per-chunk cost), for a proof of one chunk and its siblings of about 4.5 KiB.
CHUNK_BYTES = 4096

# Element type names of the digest header, by numpy dtype name (core.dtypes owns the types;
# s2/s4 and u2/u4 are held in s8 and u8 storage and digest as those).
_TYPE_NAMES = {d.numpy.name: d.name for d in ALL_DTYPES if not d.is_sub_byte}
# Bytes of one element, by header type name (a complex element is both its parts).
ELEMENT_WIDTHS = {d.name: d.itemsize for d in ALL_DTYPES if not d.is_sub_byte}
if any(CHUNK_BYTES % width for width in ELEMENT_WIDTHS.values()):
    raise AssertionError(f"CHUNK_BYTES {CHUNK_BYTES} must hold whole elements of every type")
# A complex element is its real and then its imaginary part, each canonical as its float type.
_COMPLEX_PARTS = {d.name: d.component.numpy for d in ALL_DTYPES if d.is_complex}
# The contract's canonical NaNs, by type name.
CANONICAL_NAN_BITS = {d.name: d.float_layout.canonical_nan for d in FLOAT_DTYPES}


def _nan_above(layout: FloatLayout) -> int:
    """An element is NaN when its bits without the sign exceed this: the all-ones exponent of
    the IEEE formats; the one NaN magnitude (all ones) of the "fn" formats; in the "fnuz"
    formats the one NaN is the -0 pattern, already canonical, so nothing exceeds the mask."""
    if layout.specials == "ieee":
        return layout.inf_bits
    if layout.specials == "fn":
        return layout.abs_mask - 1
    return layout.abs_mask


_NAN_ABOVE = {d.name: _nan_above(d.float_layout) for d in FLOAT_DTYPES}
_UNSIGNED = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


def sha256_hex(data: bytes) -> str:
    """SHA-256 of `data`, lower-case hex."""
    return hashlib.sha256(data).hexdigest()


def text_digest(text: str) -> str:
    """SHA-256 of the UTF-8 encoding of `text`."""
    return sha256_hex(text.encode("utf-8"))


def element_type_name(dtype: np.dtype) -> str:
    """The HLO name of a numpy element type; raises ValueError for types vxla does not hash."""
    name = np.dtype(dtype).name
    if name not in _TYPE_NAMES:
        raise ValueError(f"no tensor digest for element type {name}")
    return _TYPE_NAMES[name]


def canonical_tensor_bytes(array: np.ndarray) -> bytes:
    """Row-major little-endian bytes of `array` with every NaN replaced by the canonical NaN."""
    type_name = element_type_name(array.dtype)
    contiguous = np.require(array, requirements="C")
    if type_name in _COMPLEX_PARTS:
        return canonical_tensor_bytes(contiguous.reshape(-1).view(_COMPLEX_PARTS[type_name]))
    if type_name in CANONICAL_NAN_BITS:
        width = contiguous.dtype.itemsize
        bits = _bits(contiguous)
        is_nan = _nan_mask(bits, type_name)
        if is_nan.any():
            bits = np.where(is_nan, np.array(CANONICAL_NAN_BITS[type_name], dtype=bits.dtype), bits)
        return bits.astype(_UNSIGNED[width], copy=False).tobytes()
    if contiguous.dtype.itemsize > 1:
        little = contiguous.dtype.newbyteorder("<")
        return contiguous.astype(little, copy=False).tobytes()
    return contiguous.tobytes()


def known_digest_version(version: str) -> str:
    """`version` when this vxla computes tensor digests of that version, else
    DigestVersionError naming it."""
    if version not in TENSOR_DIGEST_VERSIONS:
        raise DigestVersionError(
            f"unknown tensor digest version {version!r} (this vxla knows {', '.join(TENSOR_DIGEST_VERSIONS)})"
        )
    return version


def tensor_header(version: str, type_name: str, dims: tuple[int, ...]) -> bytes:
    """The header a tensor digest hashes first: `<version>\n<type>[<dims>]\n`."""
    return f"{known_digest_version(version)}\n{type_name}[{','.join(str(d) for d in dims)}]\n".encode()


def chunks(data: bytes | memoryview) -> list[memoryview]:
    """The v2 chunks of canonical bytes: CHUNK_BYTES each, the last possibly shorter, none
    for no bytes; views into `data`, nothing copied."""
    view = memoryview(data).cast("B")
    return [view[start : start + CHUNK_BYTES] for start in range(0, len(view), CHUNK_BYTES)]


def chunk_root(data: bytes | memoryview) -> bytes:
    """The 32-byte root of the attest.merkle tree over the chunks of `data` (each leaf hashed
    in place)."""
    return root_of_leaf_hashes([raw_leaf_hash(chunk) for chunk in chunks(data)])


def tensor_digest(array: np.ndarray, version: str = TENSOR_DIGEST_VERSION) -> str:
    """Digest of a tensor: SHA-256 over a header naming the version, element type and
    dimensions, then (v2) the root of the tree over the canonical bytes' chunks or (v1) the
    canonical bytes. Two tensors have the same digest exactly when they have the same type,
    the same dimensions and the same values, with all NaNs counted as one value.
    DigestVersionError for a version this vxla does not know."""
    array = np.asarray(array)
    contiguous = np.require(array, requirements="C")
    digester = TensorDigester.of(array.dtype, array.shape, version)
    if sys.byteorder == "little" and contiguous.dtype.byteorder in ("=", "<", "|"):
        return digester.of_memory(contiguous.reshape(-1).view(np.uint8))
    return digester.of_canonical_bytes(canonical_tensor_bytes(contiguous))


@dataclass(frozen=True)
class TensorDigester:
    """tensor_digest for tensors of one element type and shape (and digest version), with
    the header made once: what a runtime uses to digest many buffers (an op-level trace)
    cheaply."""

    dtype: np.dtype
    type_name: str
    header: bytes
    version: str = TENSOR_DIGEST_VERSION

    @staticmethod
    def of(dtype: np.dtype, dims: tuple[int, ...], version: str = TENSOR_DIGEST_VERSION) -> TensorDigester:
        type_name = element_type_name(dtype)
        header = tensor_header(version, type_name, tuple(dims))
        return TensorDigester(np.dtype(dtype).newbyteorder("="), type_name, header, version)

    def of_memory(self, memory: np.ndarray) -> str:
        """The digest of a tensor stored in `memory`: a C-contiguous uint8 array holding its
        elements in the machine's (little-endian) byte order. Hashed in place (v2: chunk by
        chunk, each a view of `memory`) unless a NaN needs canonicalizing."""
        if self.type_name in _COMPLEX_PARTS and _has_nan(memory.view(_COMPLEX_PARTS[self.type_name]), self.type_name):
            return self.of_canonical_bytes(canonical_tensor_bytes(memory.view(self.dtype)))
        if self.type_name in CANONICAL_NAN_BITS and _has_nan(memory.view(self.dtype), self.type_name):
            return self.of_canonical_bytes(canonical_tensor_bytes(memory.view(self.dtype)))
        return self.of_canonical_bytes(memory.data)

    def of_canonical_bytes(self, data: bytes | memoryview) -> str:
        """The digest of a tensor whose canonical bytes are `data`."""
        hasher = hashlib.sha256(self.header)
        hasher.update(data if self.version == TENSOR_DIGEST_V1 else chunk_root(data))
        return hasher.hexdigest()


def _bits(array: np.ndarray) -> np.ndarray:
    width = array.dtype.itemsize
    return array.view(array.dtype.newbyteorder("=")).view(f"u{width}") if width > 1 else array.view(np.uint8)


def _nan_mask(bits: np.ndarray, type_name: str) -> np.ndarray:
    magnitude = bits & np.array((1 << (8 * bits.dtype.itemsize - 1)) - 1, dtype=bits.dtype)
    return magnitude > np.array(_NAN_ABOVE[type_name], dtype=bits.dtype)


def _has_nan(array: np.ndarray, type_name: str) -> bool:
    """Whether any element is a NaN (a complex type's parts come as their float type)."""
    if type_name == "bf16" or type_name.startswith("f8"):
        return bool(_nan_mask(_bits(array), type_name).any())
    return bool(np.isnan(array).any())


def tuple_digest(digests: list[str]) -> str:
    """Digest of a tuple value (an instruction with several outputs): SHA-256 over a header and
    its elements' digests in order, one per line."""
    return text_digest(TUPLE_DIGEST_VERSION + "\n" + "".join(d + "\n" for d in digests))


def digest_of_digests(digests: list[str]) -> str:
    """SHA-256 over the raw bytes of hex digests, in order (a digest of a sequence of chunks)."""
    return sha256_hex(b"".join(bytes.fromhex(d) for d in digests))
