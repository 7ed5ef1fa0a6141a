"""Shared assertions for the contract tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from node.chain import ContractRevert


@contextmanager
def reverts(name: str, **expected: Any) -> Iterator[None]:
    """Expect a ContractRevert named `name` whose arguments include `expected`."""
    with pytest.raises(ContractRevert) as info:
        yield
    assert info.value.name == name, str(info.value)
    for key, value in expected.items():
        assert info.value.args_by_name[key] == value, (key, str(info.value))
