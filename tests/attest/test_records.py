"""The records codec (attest/records.py): a record declared once gives its strict JSON
reader and its writer, with every error naming the field's path."""

from __future__ import annotations

from dataclasses import field

import pytest

from attest import StatementError
from attest.records import Record, codec, hex64, record


@record
class Leaf(Record):
    PATH = "leaf"
    name: str
    size: int
    digest: str = field(metadata=codec(hex64))


@record
class Tree(Record):
    PATH = "tree"
    leaves: tuple[Leaf, ...]
    parent: Leaf | None
    note: str | None = field(default=None, metadata=codec(optional=True, key="remark"))

    def check(self, path: str) -> None:
        if not self.leaves:
            raise StatementError(f"{path}.leaves", "must not be empty")


LEAF = {"name": "a", "size": 3, "digest": "0" * 64}


def test_a_record_reads_and_writes_what_its_fields_declare() -> None:
    data = {"leaves": [LEAF, {**LEAF, "name": "b"}], "parent": None}
    tree = Tree.from_dict(data)
    assert tree == Tree((Leaf("a", 3, "0" * 64), Leaf("b", 3, "0" * 64)), None)
    assert tree.to_dict() == data  # an optional field that is None is left out
    noted = Tree.from_dict({**data, "remark": "x", "parent": LEAF})
    assert noted.note == "x" and noted.to_dict() == {**data, "remark": "x", "parent": LEAF}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"leaves": [LEAF], "parent": None, "note": "x"}, r"tree\.note: unknown field"),
        ({"leaves": [LEAF]}, r"tree\.parent: missing"),
        ({"leaves": LEAF, "parent": None}, r"tree\.leaves: expected a list, got an object"),
        ({"leaves": [{**LEAF, "size": -1}], "parent": None}, r"tree\.leaves\[0\]\.size: expected an integer at least 0, got -1"),
        ({"leaves": [{**LEAF, "size": True}], "parent": None}, r"tree\.leaves\[0\]\.size: expected an integer, got a boolean"),
        ({"leaves": [{**LEAF, "name": ""}], "parent": None}, r"tree\.leaves\[0\]\.name: must not be empty"),
        ({"leaves": [LEAF], "parent": {**LEAF, "digest": "G" * 64}}, r"tree\.parent\.digest: expected 64 lower-case hex"),
        ({"leaves": [], "parent": None}, r"tree\.leaves: must not be empty"),
        ({"leaves": [LEAF], "parent": None, "remark": 7}, r"tree\.remark: expected a string, got an integer"),
    ],
)
def test_a_record_refuses_what_its_fields_do_not_allow(data: dict, error: str) -> None:
    with pytest.raises(StatementError, match=error):
        Tree.from_dict(data)


def test_a_record_must_be_declared_whole() -> None:
    with pytest.raises(TypeError, match="optional field needs a default"):

        @record
        class NoDefault(Record):
            value: str | None = field(metadata=codec(optional=True))

    class Undeclared(Record):
        pass

    with pytest.raises(TypeError, match="not declared with @record"):
        Undeclared.from_dict({})
