"""core.lru.Lru against a plain model: a list of (key, value), least recently used first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.lru import Lru

KEYS = st.integers(0, 7)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.integers(1, 40)),
        st.tuples(st.just("get"), KEYS, st.just(0)),
        st.tuples(st.just("pop"), KEYS, st.just(0)),
    ),
    max_size=60,
)


def _model_put(model: list[tuple[int, int]], key: int, value: int, entries: int, capacity: int | None) -> None:
    if capacity is not None and value > capacity:
        return
    model[:] = [(k, v) for k, v in model if k != key] + [(key, value)]
    while len(model) > entries or (capacity is not None and sum(v for _, v in model) > capacity):
        model.pop(0)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS, st.integers(1, 5), st.one_of(st.none(), st.integers(1, 80)))
def test_lru_keeps_what_a_model_keeps(operations: list[tuple[str, int, int]], entries: int, capacity: int | None) -> None:
    # Values are their own sizes when a capacity is set.
    lru: Lru[int, int] = Lru(entries, capacity or 0, size=(lambda v: v) if capacity is not None else None)
    model: list[tuple[int, int]] = []
    for operation, key, value in operations:
        found = dict(model).get(key)
        if operation == "put":
            lru.put(key, value)
            _model_put(model, key, value, entries, capacity)
        elif operation == "get":
            assert lru.get(key) == found
            if found is not None:
                model[:] = [(k, v) for k, v in model if k != key] + [(key, found)]
        else:
            assert lru.pop(key) == found
            model[:] = [(k, v) for k, v in model if k != key]
        assert list(lru) == [k for k, _ in model]
        assert len(lru) == len(model) and all(k in lru for k, _ in model)


def test_bounds_must_keep_something() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        Lru(0)
    with pytest.raises(ValueError, match="at least one entry"):
        Lru(4, 0, size=len)
