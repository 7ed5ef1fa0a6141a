"""Canonical digests: the one place where vxla turns bytes, text and tensors into hashes.

All digests are lower-case hex SHA-256.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

import numpy as np

TENSOR_DIGEST_VERSION = "vxla.tensor.v1"
TUPLE_DIGEST_VERSION = "vxla.tuple.v1"

# Element type names of the digest header, by numpy dtype name (bfloat16 comes from ml_dtypes).
_TYPE_NAMES = {
    "bool": "pred",
    "int8": "s8",
    "int16": "s16",
    "int32": "s32",
    "int64": "s64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
    "float8_e5m2": "f8e5m2",
    "float8_e4m3": "f8e4m3",
    "float8_e3m4": "f8e3m4",
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    "float8_e4m3b11fnuz": "f8e4m3b11fnuz",
}
# A complex element is its real and then its imaginary part, each canonical as its float type.
_COMPLEX_PARTS = {"c64": np.dtype(np.float32), "c128": np.dtype(np.float64)}

# The contract's canonical NaNs (compiler/numerics/dtypes.py), kept here because attest sits
# below the compiler; tests/attest/test_digests.py holds the two equal.
CANONICAL_NAN_BITS = {
    "f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000,
    "f8e5m2": 0x7E, "f8e4m3": 0x7C, "f8e3m4": 0x78, "f8e4m3fn": 0x7F,
    "f8e4m3fnuz": 0x80, "f8e5m2fnuz": 0x80, "f8e4m3b11fnuz": 0x80,
}  # fmt: skip
# An element is NaN when its bits without the sign exceed this: the all-ones exponent of the
# IEEE formats; f8e4m3fn's one NaN magnitude is all ones; the fnuz formats' one NaN is the
# -0 pattern, already canonical, so nothing exceeds their mask.
_NAN_ABOVE = {
    "f16": 0x7C00, "bf16": 0x7F80, "f32": 0x7F800000, "f64": 0x7FF0000000000000,
    "f8e5m2": 0x7C, "f8e4m3": 0x78, "f8e3m4": 0x70, "f8e4m3fn": 0x7E,
    "f8e4m3fnuz": 0x7F, "f8e5m2fnuz": 0x7F, "f8e4m3b11fnuz": 0x7F,
}  # fmt: skip
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
