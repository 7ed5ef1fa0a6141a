"""Element proofs against vxla.tensor.v2 digests (attest/tensor_proof.py)."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from attest.digests import CHUNK_BYTES, ELEMENT_WIDTHS, canonical_tensor_bytes, tensor_digest
from attest.errors import AttestError, ElementProofError
from attest.tensor_proof import ElementProof, element_proof, verify_element_proof


def _tensor(dtype: object, count: int, seed: int = 0) -> np.ndarray:
    """`count` elements of `dtype` (several chunks' worth for the sizes used), 2-D."""
    rng = np.random.default_rng(seed)
    values = rng.integers(-7, 8, count)
    if np.dtype(dtype).kind == "c":
        array = (values + 1j * rng.integers(-7, 8, count)).astype(dtype)
    elif np.dtype(dtype).kind == "b":
        array = (values > 0).astype(dtype)
    elif np.dtype(dtype).kind == "u":
        array = (values + 7).astype(dtype)
    else:
        array = values.astype(dtype)
    return array.reshape(-1, 1) if count % 2 else array.reshape(2, -1)


# (type, element count): an odd chunk count with a short last chunk (a promoted node) or an
# exact number of chunks; s4 is held in int8, its one byte an element.
CASES = [
    ("f32", np.float32, 3 * CHUNK_BYTES // 4 + 5),
    ("f64", np.float64, 2 * CHUNK_BYTES // 8),
    ("f16", np.float16, 3 * CHUNK_BYTES // 2 + 1),
    ("bf16", ml_dtypes.bfloat16, 2 * CHUNK_BYTES // 2 + 2),
    ("c64", np.complex64, 3 * CHUNK_BYTES // 8 - 3),
    ("c128", np.complex128, 2 * CHUNK_BYTES // 16 + 1),
    ("s4", ml_dtypes.int4, 2 * CHUNK_BYTES + 7),
    ("u8", np.uint8, CHUNK_BYTES),
    ("pred", np.bool_, 5),
]


def _s4_holder(array: np.ndarray) -> np.ndarray:
    """An s4 tensor as vxla holds it: int8 storage, one element a byte."""
    return array.astype(np.int8) if array.dtype == ml_dtypes.int4 else array


@pytest.mark.parametrize(("name", "dtype", "count"), CASES, ids=[c[0] for c in CASES])
def test_first_last_and_chunk_boundary_elements_prove(name: str, dtype: object, count: int) -> None:
    array = _s4_holder(_tensor(dtype, count))
    digest = tensor_digest(array)
    width = array.dtype.itemsize
    per_chunk = CHUNK_BYTES // width
    data = canonical_tensor_bytes(array)
    flat = array.reshape(-1)
    indices = {0, count - 1} | {
        i for k in (1, 2) for i in (k * per_chunk - 1, k * per_chunk) if i < count
    }
    for index in sorted(indices):
        proof = element_proof(array, index)
        assert proof.width == width == ELEMENT_WIDTHS["s8" if name == "s4" else name]
        assert proof.chunk_index == index * width // CHUNK_BYTES
        assert proof.flat_index == index
        got = verify_element_proof(digest, proof, flat_index=index)
        assert got == data[index * width : (index + 1) * width]
        assert np.frombuffer(got, array.dtype)[0] == flat[index]  # the whole value, complex too


def test_a_nan_element_proves_as_the_canonical_nan() -> None:
    array = np.arange(CHUNK_BYTES, dtype=np.float32)  # four chunks
    array[CHUNK_BYTES // 4 + 3] = np.frombuffer(np.uint32(0xFFC01234).tobytes(), np.float32)[0]
    digest = tensor_digest(array)
    bits = np.frombuffer(
        verify_element_proof(digest, element_proof(array, CHUNK_BYTES // 4 + 3)), np.uint32
    )[0]
    assert bits == 0x7FC00000
    c = np.zeros(3, np.complex64)
    c[1] = complex(np.nan, 2.0)
    element = verify_element_proof(tensor_digest(c), element_proof(c, 1))
    assert element == np.array([0x7FC00000], "<u4").tobytes() + np.array([2.0], "<f4").tobytes()


def _proof() -> tuple[str, ElementProof]:
    array = _tensor(np.float32, 5 * CHUNK_BYTES // 4 + 1, seed=3)  # six chunks, a short last one
    return tensor_digest(array), element_proof(array, 2 * CHUNK_BYTES // 4 + 9)


def _flip(data: bytes, at: int = 0) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: {"chunk": _flip(p.chunk, 37)}, "do not give the digest"),
        (lambda p: {"siblings": (p.siblings[0][::-1], *p.siblings[1:])}, "do not give the digest"),
        (lambda p: {"siblings": p.siblings[:-1]}, "siblings: .*too few|siblings: .* expected"),
        (lambda p: {"siblings": (*p.siblings, "ab" * 32)}, "siblings: .* expected"),
        (lambda p: {"chunk_index": p.chunk_index + 1}, "do not give the digest"),
        (lambda p: {"chunk_index": 6}, "chunk_index: 6 is not in 0..5"),
        (lambda p: {"chunk_count": 7}, "chunk_count: 7, the header's tensor has 6 chunks"),
        (lambda p: {"header": p.header.replace(b"[5121,1]", b"[5121,2]")}, "chunk_count"),
        (lambda p: {"header": p.header.replace(b"f32", b"s32")}, "do not give the digest"),
        (
            lambda p: {"header": p.header.replace(b"v2", b"v1")},
            "element proofs are of vxla.tensor.v2 digests, not vxla.tensor.v1",
        ),
        (lambda p: {"header": p.header.replace(b"v2", b"v9")}, "not vxla.tensor.v9"),
        (lambda p: {"header": p.header.replace(b"[5121", b"[05121")}, "canonical form"),
        (lambda p: {"header": b"garbage"}, "not a tensor digest header"),
        (lambda p: {"width": 8}, "width: 8, the header's element type has 4 bytes"),
        (lambda p: {"offset": p.offset + 2}, "offset: .* not the start of an element"),
        (lambda p: {"offset": CHUNK_BYTES}, "offset"),
        (
            lambda p: {"chunk": p.chunk[:-4]},
            "chunk: 4092 bytes, chunk 2 of the header's tensor has 4096",
        ),
        (lambda p: {"chunk_index": True}, "chunk_index: expected an integer"),
    ],
)
def test_a_tampered_proof_is_rejected(change, message: str) -> None:  # noqa: ANN001
    digest, proof = _proof()
    assert verify_element_proof(digest, proof)  # the untouched proof verifies
    with pytest.raises(ElementProofError, match=message):
        verify_element_proof(digest, dataclasses.replace(proof, **change(proof)))


def test_the_wrong_digest_or_index_is_rejected() -> None:
    digest, proof = _proof()
    with pytest.raises(ElementProofError, match="do not give the digest"):
        verify_element_proof(_flip(bytes.fromhex(digest)).hex(), proof)
    with pytest.raises(ElementProofError, match="digest: expected 64 lower-case hex"):
        verify_element_proof(digest.upper(), proof)
    with pytest.raises(
        ElementProofError, match=f"the proof is of element {proof.flat_index}, not 3"
    ):
        verify_element_proof(digest, proof, flat_index=3)
    assert isinstance(ElementProofError("x"), AttestError) and isinstance(
        ElementProofError("x"), ValueError
    )


def test_no_proof_of_an_element_the_tensor_does_not_have() -> None:
    with pytest.raises(ElementProofError, match=r"flat_index: 6 is not in 0\.\.5"):
        element_proof(np.zeros((2, 3), np.float32), 6)
    with pytest.raises(ElementProofError, match="flat_index"):
        element_proof(np.zeros((0, 3), np.float32), 0)


def test_the_chunk_is_what_the_digest_hashes_and_the_json_form() -> None:
    digest, proof = _proof()
    assert proof.header == b"vxla.tensor.v2\nf32[5121,1]\n"
    assert (proof.chunk_count, proof.chunk_index, proof.offset, proof.width) == (6, 2, 36, 4)
    data = proof.to_dict()
    assert data["chunk"] == proof.chunk.hex() and data["siblings"] == list(proof.siblings)
    assert len(proof.siblings) == 3  # six leaves: three levels with a sibling on this path
