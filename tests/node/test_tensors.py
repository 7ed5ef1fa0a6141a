"""node.tensors: .npy bytes written without np.save are np.save's bytes, and read back."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

from node.tensors import npy_bytes, read_npy


def _saved(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
SHAPES = [(), (0,), (1,), (3, 0, 2), (2, 3), (1, 1, 1, 1, 5), (7, 3, 2, 1, 1, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_npy_bytes_are_what_np_save_writes(dtype: type) -> None:
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        array = (rng.normal(size=shape) * 100).astype(dtype)
        data = npy_bytes(array)
        assert data == _saved(array), shape
        back = read_npy(data, array.dtype, shape)
        assert back.dtype == array.dtype and back.tobytes() == array.tobytes()
    # Not C-contiguous (a transpose, a stride): the bytes of its C-order copy.
    matrix = (rng.normal(size=(4, 6)) * 100).astype(dtype)
    for view in (matrix.T, matrix[:, ::2]):
        assert npy_bytes(view) == _saved(np.ascontiguousarray(view))


def test_int4_is_written_as_the_bytes_holding_its_values_and_objects_are_refused() -> None:
    values = np.array([-8, -1, 0, 7], dtype=ml_dtypes.int4)
    assert npy_bytes(values) == _saved(values.astype(np.int8))
    assert npy_bytes(np.array([0, 15], dtype=ml_dtypes.uint4)) == _saved(np.array([0, 15], dtype=np.uint8))
    with pytest.raises(ValueError, match="pickle"):
        npy_bytes(np.array([object()], dtype=object))
