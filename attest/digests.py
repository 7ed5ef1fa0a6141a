"""Canonical digests: the one place where vxla turns bytes, text and tensors into hashes.

All digests are lower-case hex SHA-256.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

import numpy as np

from core.dtypes import ALL_DTYPES, FLOAT_DTYPES, FloatLayout

TENSOR_DIGEST_VERSION = "vxla.tensor.v1"
TUPLE_DIGEST_VERSION = "vxla.tuple.v1"

# Element type names of the digest header, by numpy dtype name (core.dtypes owns the types;
# s2/s4 and u2/u4 are held in s8 and u8 storage and digest as those).
_TYPE_NAMES = {d.numpy.name: d.name for d in ALL_DTYPES if not d.is_sub_byte}
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


def tensor_digest(array: np.ndarray) -> str:
    """Digest of a tensor: SHA-256 over a header naming the element type and dimensions, then
    the canonical bytes. Two tensors have the same digest exactly when they have the same type,
    the same dimensions and the same values, with all NaNs counted as one value."""
    array = np.asarray(array)
    contiguous = np.require(array, requirements="C")
    digester = TensorDigester.of(array.dtype, array.shape)
    if sys.byteorder == "little" and contiguous.dtype.byteorder in ("=", "<", "|"):
        return digester.of_memory(contiguous.reshape(-1).view(np.uint8))
    return digester.of_canonical_bytes(canonical_tensor_bytes(contiguous))


@dataclass(frozen=True)
class TensorDigester:
    """tensor_digest for tensors of one element type and shape, with the header made once:
    what a runtime uses to digest many buffers (an op-level trace) cheaply."""

    dtype: np.dtype
    type_name: str
    header: bytes

    @staticmethod
    def of(dtype: np.dtype, dims: tuple[int, ...]) -> TensorDigester:
        type_name = element_type_name(dtype)
        header = f"{TENSOR_DIGEST_VERSION}\n{type_name}[{','.join(str(d) for d in dims)}]\n".encode()
        return TensorDigester(np.dtype(dtype).newbyteorder("="), type_name, header)

    def of_memory(self, memory: np.ndarray) -> str:
        """The digest of a tensor stored in `memory`: a C-contiguous uint8 array holding its
        elements in the machine's (little-endian) byte order. Hashed in place unless a NaN
        needs canonicalizing."""
        if self.type_name in _COMPLEX_PARTS and _has_nan(memory.view(_COMPLEX_PARTS[self.type_name]), self.type_name):
            return self.of_canonical_bytes(canonical_tensor_bytes(memory.view(self.dtype)))
        if self.type_name in CANONICAL_NAN_BITS and _has_nan(memory.view(self.dtype), self.type_name):
            return self.of_canonical_bytes(canonical_tensor_bytes(memory.view(self.dtype)))
        hasher = hashlib.sha256(self.header)
        hasher.update(memory.data)
        return hasher.hexdigest()

    def of_canonical_bytes(self, data: bytes) -> str:
        return sha256_hex(self.header + data)


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
