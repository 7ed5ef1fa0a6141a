"""The element types (core/dtypes.py) against numpy's and ml_dtypes' own descriptions of them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from core.dtypes import ALL_DTYPES, BY_NAME, FLOAT_DTYPES, DType, from_numpy


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_each_float_layout_is_its_numpy_type(dtype: DType) -> None:
    info = ml_dtypes.finfo(dtype.numpy)
    layout = dtype.float_layout
    assert layout.bits == 8 * dtype.itemsize
    assert layout.mantissa_bits == info.nmant
    assert layout.max_finite == float(info.max)
    nan = np.array(layout.canonical_nan, dtype=f"u{dtype.itemsize}").view(dtype.numpy)
    assert np.isnan(nan.astype(np.float32))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_each_type_is_held_in_a_byte_wide_type_of_its_kind(dtype: DType) -> None:
    holder = dtype.holder
    assert not holder.is_sub_byte and holder.numpy == dtype.numpy and holder.kind == dtype.kind
    assert (holder is dtype) == (not dtype.is_sub_byte)
    assert from_numpy(dtype.numpy) is holder
    assert BY_NAME[dtype.name] is dtype
