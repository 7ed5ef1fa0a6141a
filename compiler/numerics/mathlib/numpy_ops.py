"""The numpy backend of the algorithm DSL: values are 1-D numpy arrays (the reference).

float values are float64 arrays, int values int64 arrays and masks bool arrays; numpy's
operators already have the DSL's meaning (one correctly rounded operation per element).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .dsl import Table


class NumpyOps:
    """Operations of the DSL on numpy arrays (see compiler.numerics.mathlib.dsl)."""

    where = staticmethod(np.where)
    abs = staticmethod(np.abs)
    copysign = staticmethod(np.copysign)
    sqrt = staticmethod(np.sqrt)
    rint = staticmethod(np.rint)
    floor = staticmethod(np.floor)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    isnan = staticmethod(np.isnan)
    isfinite = staticmethod(np.isfinite)
    isinf = staticmethod(np.isinf)
    signbit = staticmethod(np.signbit)

    @staticmethod
    def bits(x: np.ndarray) -> np.ndarray:
        return x.view(np.int64)

    @staticmethod
    def from_bits(i: np.ndarray) -> np.ndarray:
        return i.view(np.float64)

    @staticmethod
    def to_int(x: np.ndarray) -> np.ndarray:
        return x.astype(np.int64)

    @staticmethod
    def to_float(i: np.ndarray) -> np.ndarray:
        return i.astype(np.float64)

    @staticmethod
    def table(t: Table, i: np.ndarray) -> np.ndarray:
        return t.array[i]

    @staticmethod
    def branch(
        c: np.ndarray,
        if_true: Callable[..., Any],
        if_false: Callable[..., Any],
        args: tuple[np.ndarray, ...],
        safe_true: tuple[float | int, ...],
        safe_false: tuple[float | int, ...],
    ) -> Any:
        """Each path on its own elements only (compressed), results merged in place."""
        del safe_true, safe_false  # compressed paths never see the other lanes
        if c.all():
            return if_true(*args)
        if not c.any():
            return if_false(*args)
        not_c = ~c
        got_true = if_true(*(a[c] for a in args))
        got_false = if_false(*(a[not_c] for a in args))
        single = not isinstance(got_true, tuple)
        if single:
            got_true, got_false = (got_true,), (got_false,)
        merged = []
        for t, f in zip(got_true, got_false, strict=True):
            out = np.empty(c.shape, dtype=np.result_type(t, f))
            out[c] = t
            out[not_c] = f
            merged.append(out)
        return merged[0] if single else tuple(merged)


NUMPY = NumpyOps()
