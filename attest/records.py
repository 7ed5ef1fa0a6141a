"""A strict codec for the trace's records: each record is declared once, as a class deriving
`Record` under the `@record` decorator (a frozen dataclass), and its JSON form follows from
its fields.

A field is read and written by its type unless its `field(metadata=codec(...))` says
otherwise:
- `str`: a non-empty string; `int`: an integer, at least 0 (bool is not one);
- a `Record`: a JSON object of exactly its fields;
- `tuple[X, ...]`: a JSON list of X;
- `X | None`: null or X;
- `codec(read=..., write=...)`: a check of its own (a hex digest, an address, a range) and
  the JSON value it writes; `codec(key=...)`: another JSON name; `codec(optional=True)`:
  absent from the JSON exactly when the value is None (a field later versions added).

Parsing is strict and every error names the full path of the field (`StatementError`):
an unknown field, a missing one, a wrong type. A record's own rules between its fields go
in `check(path)`, run once its fields are read.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from attest.errors import StatementError

_HEX64 = re.compile(r"[0-9a-f]{64}")

Reader = Callable[[Any, str], Any]
Writer = Callable[[Any], Any]


# ---------------------------------------------------------------------------------------------
# Field checks (each names the full path of the field it checks)


def obj(value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()) -> Mapping[str, Any]:
    """`value` as a JSON object of the `required` fields and any of the `optional` ones."""
    if not isinstance(value, Mapping):
        raise StatementError(path, f"expected an object, got {kind(value)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise StatementError(f"{path}.{unknown[0]}" if path else unknown[0], "unknown field")
    for name in required:
        if name not in value:
            raise StatementError(f"{path}.{name}" if path else name, "missing")
    return value


def kind(value: Any) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def string(value: Any, path: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str):
        raise StatementError(path, f"expected a string, got {kind(value)}")
    if not value:
        raise StatementError(path, "must not be empty")
    return value


def any_string(value: Any, path: str) -> str:
    """A string, which may be empty."""
    if not isinstance(value, str):
        raise StatementError(path, f"expected a string, got {kind(value)}")
    return value


def hex64(value: Any, path: str) -> str:
    """64 lower-case hex characters (a SHA-256 digest)."""
    if not isinstance(value, str):
        raise StatementError(path, f"expected 64 lower-case hex characters, got {kind(value)}")
    if not _HEX64.fullmatch(value):
        raise StatementError(path, f"expected 64 lower-case hex characters, got {value!r}")
    return value


def integer(value: Any, path: str, minimum: int = 0, limit: int | None = None) -> int:
    """An integer in minimum..limit - 1 (no upper bound without `limit`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StatementError(path, f"expected an integer, got {kind(value)}")
    if value < minimum or (limit is not None and value >= limit):
        bound = f"at least {minimum}" if limit is None else f"in {minimum}..{limit - 1}"
        raise StatementError(path, f"expected an integer {bound}, got {value}")
    return value


def at_least(minimum: int) -> Reader:
    """The reader of an integer of at least `minimum`."""
    return lambda value, path: integer(value, path, minimum)


def items(value: Any, path: str) -> Sequence[Any]:
    """A JSON list."""
    if not isinstance(value, list | tuple):
        raise StatementError(path, f"expected a list, got {kind(value)}")
    return value


# ---------------------------------------------------------------------------------------------
# The codec


@dataclass(frozen=True)
class FieldCodec:
    """How one field is read and written, where its type alone does not say (module
    docstring)."""

    read: Reader | None = None
    write: Writer | None = None
    key: str | None = None
    optional: bool = False


def codec(read: Reader | None = None, write: Writer | None = None, *, key: str | None = None, optional: bool = False) -> dict[str, FieldCodec]:
    """The `metadata` of a field read or written otherwise than by its type."""
    return {"codec": FieldCodec(read, write, key, optional)}


class Record:
    """A trace record (declared with `@record`): `to_dict` and `from_dict` derived from its
    fields. A subclass names the path its fields are reported under when parsed on its own
    (`PATH`) and may add `check`."""

    PATH: ClassVar[str] = ""

    def check(self, path: str) -> None:
        """Raises StatementError, naming the field, where the fields break a rule between
        them (none by default)."""

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        raise TypeError(f"{type(self).__name__} is not declared with @record")

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None) -> typing.Self:
        """The record of JSON `data`, strictly (StatementError naming the field's path)."""
        raise TypeError(f"{cls.__name__} is not declared with @record")


R = typing.TypeVar("R", bound=type[Record])


def record(cls: R) -> R:
    """Declares a Record: makes it a frozen dataclass and gives it the `to_dict` and
    `from_dict` its fields' codecs say. The records it holds must be declared before it."""
    cls = dataclass(frozen=True)(cls)
    to_dict, from_dict = _derive(cls)
    cls.to_dict = to_dict  # type: ignore[method-assign]
    cls.from_dict = classmethod(from_dict)  # type: ignore[method-assign,assignment]
    return cls


def _derive(cls: type[Record]) -> tuple[Callable[..., dict[str, Any]], Callable[..., Any]]:
    """`cls`'s to_dict and from_dict, written out from its fields' codecs as the text of two
    plain functions, the way `dataclasses` makes `__init__`: a trace holds tens of thousands
    of records, and a loop over field specs per record took three to five times as long."""
    hints = typing.get_type_hints(cls)
    names: dict[str, Any] = {"obj": obj}
    written, optional_written, read, required, optional = [], [], [], [], []
    for index, item in enumerate(fields(cls)):  # type: ignore[arg-type]
        override = item.metadata.get("codec", FieldCodec())
        if override.optional and item.default is MISSING and item.default_factory is MISSING:
            raise TypeError(f"{cls.__name__}.{item.name}: an optional field needs a default")
        key = override.key or item.name
        write = override.write or _writer(hints[item.name])
        names[f"read{index}"] = override.read or _reader(hints[item.name])
        value = f"self.{item.name}"
        if write is not None:
            names[f"write{index}"] = write
            value = f"write{index}({value})"
        if override.optional:
            optional.append(key)
            optional_written.append(f"    if self.{item.name} is not None:\n        data[{key!r}] = {value}")
            read.append(f"{item.name}=read{index}(value[{key!r}], path + {'.' + key!r}) if {key!r} in value else None")
        else:
            required.append(key)
            written.append(f"{key!r}: {value}")
            read.append(f"{item.name}=read{index}(value[{key!r}], path + {'.' + key!r})")
    names["required"], names["optional"] = tuple(required), tuple(optional)
    check = "" if cls.check is Record.check else "    record.check(path)\n"
    source = (
        "def to_dict(self):\n"
        f"    data = {{{', '.join(written)}}}\n" + "".join(f"{line}\n" for line in optional_written) + "    return data\n"
        "def from_dict(cls, data, path=None):\n"
        f"    path = {cls.PATH!r} if path is None else path\n"
        "    value = obj(data, path, required, optional)\n"
        f"    record = cls({', '.join(read)})\n" + check + "    return record\n"
    )
    exec(compile(source, f"<codec of {cls.__qualname__}>", "exec"), names)  # noqa: S102 - made from field names only
    return names["to_dict"], names["from_dict"]


def _reader(hint: Any) -> Reader:
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in arguments if a is not type(None)]
        read = _reader(inner)
        return lambda value, path: None if value is None else read(value, path)
    if origin is tuple:
        item = _reader(arguments[0])
        return lambda value, path: tuple(item(x, f"{path}[{i}]") for i, x in enumerate(items(value, path)))
    if hint is str:
        return string
    if hint is int:
        return integer
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict
    raise TypeError(f"no reader for {hint!r}: give the field codec(read=...)")


def _writer(hint: Any) -> Writer | None:
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in arguments if a is not type(None)]
        write = _writer(inner)
        return None if write is None else lambda value: None if value is None else write(value)
    if origin is tuple:
        item = _writer(arguments[0])
        return list if item is None else lambda value: [item(x) for x in value]
    if hint is str or hint is int:
        return None
    if isinstance(hint, type) and issubclass(hint, Record):
        return _as_dict
    raise TypeError(f"no writer for {hint!r}: give the field codec(write=...)")


def _as_dict(value: Record) -> dict[str, Any]:
    return value.to_dict()
