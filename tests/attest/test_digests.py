"""Tensor and text digests."""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np

from attest.digests import canonical_tensor_bytes, sha256_hex, tensor_digest, text_digest


def test_digest_is_sha256_of_header_and_little_endian_bytes() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    expected = hashlib.sha256(b"vxla.tensor.v1\ns32[2,3]\n" + x.astype("<i4").tobytes()).hexdigest()
    assert tensor_digest(x) == expected
    assert tensor_digest(x.astype(">i4")) == expected  # byte order of the array does not matter
    assert tensor_digest(np.asfortranarray(x)) == expected  # nor its memory order


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
