"""The numpy backend of the algorithm DSL (compiler.numerics.mathlib.numpy_ops)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.numerics.mathlib.dsl import Table
from compiler.numerics.mathlib.numpy_ops import NUMPY


def _paths(calls: list[int]):
    def if_true(a, i):
        calls.append(a.size)
        return a * 2.0, i + 1

    def if_false(a, i):
        calls.append(-a.size)
        return a - 1.0, i * 0

    return if_true, if_false


@pytest.mark.parametrize("pattern", [[True] * 4, [False] * 4, [True, False, False, True]])
def test_branch_evaluates_each_path_on_its_elements(pattern: list[bool]) -> None:
    c = np.array(pattern)
    a = np.array([1.0, 2.0, 3.0, 4.0])
    i = np.array([5, 6, 7, 8])
    calls: list[int] = []
    got_a, got_i = NUMPY.branch(c, *_paths(calls), (a, i), (0.0, 0), (0.0, 0))
    assert got_a.tolist() == np.where(c, a * 2.0, a - 1.0).tolist()
    assert got_i.tolist() == np.where(c, i + 1, 0).tolist() and got_i.dtype == np.int64
    assert sorted(calls) == sorted(v for v in (c.sum(), -(~c).sum()) if v)


def test_branch_with_a_single_result() -> None:
    c = np.array([True, False])
    got = NUMPY.branch(c, lambda a: a + 1.0, lambda a: a * 0.0, (np.array([1.0, 2.0]),),
                       (0.0,), (0.0,))
    assert got.tolist() == [2.0, 0.0]


def test_tables() -> None:
    t = Table("t", [1.5, 2.5])
    assert t.is_float and len(t) == 2
    assert NUMPY.table(t, np.array([1, 0, 1])).tolist() == [2.5, 1.5, 2.5]
    assert not Table("i", [1, 2]).is_float
    with pytest.raises(TypeError):
        Table("mixed", [1, 2.0])


def test_bit_views_and_conversions() -> None:
    x = np.array([1.0, -0.0, 2.0**-1074])
    assert NUMPY.bits(x).tolist() == [0x3FF0000000000000, -(2**63), 1]
    assert NUMPY.from_bits(NUMPY.bits(x)).tolist() == x.tolist()
    assert NUMPY.to_int(np.array([-3.0, 2.0**50])).tolist() == [-3, 2**50]
    assert NUMPY.to_float(np.array([-3, 7])).tolist() == [-3.0, 7.0]
