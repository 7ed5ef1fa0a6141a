"""Tensor and text digests."""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np
import pytest

from attest.digests import (
    CHUNK_BYTES,
    TENSOR_DIGEST_VERSIONS,
    canonical_tensor_bytes,
    element_type_name,
    sha256_hex,
    tensor_digest,
    text_digest,
)

V1, V2 = "vxla.tensor.v1", "vxla.tensor.v2"


def test_v1_digest_is_sha256_of_header_and_little_endian_bytes() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    expected = hashlib.sha256(b"vxla.tensor.v1\ns32[2,3]\n" + x.astype("<i4").tobytes()).hexdigest()
    assert tensor_digest(x, V1) == expected
    assert tensor_digest(x.astype(">i4"), V1) == expected  # byte order of the array does not matter
    assert tensor_digest(np.asfortranarray(x), V1) == expected  # nor its memory order


def test_v2_digest_is_sha256_of_header_and_the_chunk_root() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    leaf = hashlib.sha256(b"\x00" + x.astype("<i4").tobytes()).digest()  # one chunk: the root is its leaf
    expected = hashlib.sha256(b"vxla.tensor.v2\ns32[2,3]\n" + leaf).hexdigest()
    assert tensor_digest(x) == tensor_digest(x, V2) == expected  # v2 is the default
    assert tensor_digest(x.astype(">i4")) == expected
    assert tensor_digest(np.asfortranarray(x)) == expected


def test_type_and_shape_are_part_of_the_digest() -> None:
    x = np.zeros(6, dtype=np.float32)
    digests = {tensor_digest(x), tensor_digest(x.reshape(2, 3)), tensor_digest(x.view(np.int32)), tensor_digest(x.reshape(1, 6))}
    assert len(digests) == 4


def test_every_nan_digests_as_the_canonical_nan() -> None:
    payloads = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32).view(np.float32)
    canonical = np.full(4, 0x7FC00000, dtype=np.uint32).view(np.float32)
    assert tensor_digest(payloads) == tensor_digest(canonical)
    assert canonical_tensor_bytes(payloads) == canonical.tobytes()
    inf = np.array([np.inf], dtype=np.float32)
    assert tensor_digest(inf) != tensor_digest(canonical[:1])
    bf = np.array([0x7FC1, 0xFF80], dtype=np.uint16).view(ml_dtypes.bfloat16)
    assert canonical_tensor_bytes(bf) == np.array([0x7FC0, 0xFF80], dtype=np.uint16).tobytes()


def test_signed_zero_changes_the_digest() -> None:
    assert tensor_digest(np.array([0.0])) != tensor_digest(np.array([-0.0]))


def test_text_and_bytes() -> None:
    assert sha256_hex(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert text_digest("é") == hashlib.sha256("é".encode()).hexdigest()


def _tree_root(leaves: list[bytes]) -> bytes:
    """The Merkle root by its definition, written out here (not attest.merkle's): leaf
    SHA-256(0x00 || chunk), node SHA-256(0x01 || left || right), an odd last node promoted,
    no leaves SHA-256 of nothing."""
    level = [hashlib.sha256(b"\x00" + leaf).digest() for leaf in leaves]
    if not level:
        return hashlib.sha256(b"").digest()
    while len(level) > 1:
        pairs = [hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        level = pairs + level[-1:] if len(level) % 2 else pairs
    return level[0]


def _by_definition(array: np.ndarray, version: str = V2) -> str:
    array = np.asarray(array)
    dims = ",".join(str(d) for d in array.shape)
    header = f"{version}\n{element_type_name(array.dtype)}[{dims}]\n".encode()
    data = canonical_tensor_bytes(array)
    if version == V1:
        return sha256_hex(header + data)
    return sha256_hex(header + _tree_root([data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]))


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [("float32", (0,)), ("float32", (3, 0)), ("uint8", (CHUNK_BYTES,)), ("int16", (CHUNK_BYTES // 2 + 1,)),
     ("float64", (3, CHUNK_BYTES // 8)), ("complex128", (5, CHUNK_BYTES // 16 + 3)), ("bfloat16", (7, CHUNK_BYTES // 2 - 1))],
)  # fmt: skip
def test_v2_digest_equals_the_definition_over_chunks(dtype: str, shape: tuple[int, ...]) -> None:
    """Empty, one exact chunk, a chunk and a byte more, three chunks, an odd count of chunks
    with a short last one (a promoted node): the digest is the chunk tree's, computed here from
    hashlib and the chunking rule."""
    numpy_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0, 100, shape).astype(numpy_type)
    assert tensor_digest(x) == _by_definition(x, V2)
    assert tensor_digest(x, V1) == _by_definition(x, V1)
    assert tensor_digest(x, V1) != tensor_digest(x, V2)


def test_an_unknown_digest_version_is_refused_by_name() -> None:
    from attest.digests import TensorDigester
    from attest.errors import DigestVersionError

    assert TENSOR_DIGEST_VERSIONS == (V1, V2)
    with pytest.raises(DigestVersionError, match=r"vxla\.tensor\.v9.*vxla\.tensor\.v1, vxla\.tensor\.v2"):
        tensor_digest(np.zeros(3, np.float32), "vxla.tensor.v9")
    with pytest.raises(ValueError, match="vxla.tensor.v0"):
        TensorDigester.of(np.dtype(np.float32), (3,), "vxla.tensor.v0")


@pytest.mark.parametrize("version", [V1, V2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "uint8", "bool", "int64"])
def test_hashing_memory_in_place_matches_the_definition(dtype: str, version: str) -> None:
    """tensor_digest hashes an array's memory directly when it is already canonical; it must
    agree with the definition (header + canonical bytes) for NaN-free, NaN-holding,
    non-contiguous and big-endian arrays alike."""
    numpy_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(len(dtype))
    x = (rng.standard_normal((4, 6)) * 100).astype(numpy_type)
    variants = [x, x.T, x[:, ::2]]
    if np.dtype(numpy_type).itemsize > 1 and dtype != "bfloat16":
        variants.append(x.astype(np.dtype(numpy_type).newbyteorder(">")))
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        with_nan = x.copy()
        with_nan.reshape(-1).view(np.uint8)[-1] |= 0x7F  # sign and top exponent bits set
        with_nan.reshape(-1)[3] = np.nan
        variants.append(with_nan)
    for variant in variants:
        assert tensor_digest(variant, version) == _by_definition(variant, version)


@pytest.mark.parametrize("type_name", ["f16", "bf16", "f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz"])
def test_the_nan_masks_derived_from_the_layouts_find_exactly_numpys_nans(type_name: str) -> None:
    # attest derives its NaN tests from core.dtypes' layouts; every code of each type narrower
    # than 32 bits, against ml_dtypes' and numpy's own isnan. The mask may pass over the
    # canonical NaN itself (the fnuz formats' only NaN, the -0 pattern, needs no rewriting).
    from attest.digests import _nan_mask
    from core.dtypes import BY_NAME

    dtype = BY_NAME[type_name]
    codes = np.arange(1 << dtype.bits, dtype=f"u{dtype.itemsize}")
    canonical = codes == dtype.float_layout.canonical_nan
    assert np.array_equal(_nan_mask(codes, type_name) | canonical, np.isnan(codes.view(dtype.numpy).astype(np.float32)))


def test_8_bit_float_digests_count_every_nan_as_one() -> None:
    """Every NaN code of each 8-bit float type digests as its canonical NaN, and no other
    code does (the types' own NaN tests, compiler/numerics/floats.py, are the oracle)."""
    from compiler.numerics.floats import float8_nan
    from core.dtypes import FLOAT8_DTYPES

    for dtype in FLOAT8_DTYPES:
        codes = np.arange(256, dtype=np.uint8)
        nan = float8_nan(codes, dtype.float_layout)
        canonical = np.where(nan, np.uint8(dtype.float_layout.canonical_nan), codes)
        assert tensor_digest(codes.view(dtype.numpy)) == tensor_digest(canonical.view(dtype.numpy)), dtype.name
        assert canonical_tensor_bytes(codes.view(dtype.numpy)) == canonical.tobytes(), dtype.name
