"""The opcode tables of the op family modules (the verifier's shape rules, the reference's
handlers, the backend's emitters), derived from the registry: which opcodes a family holds
is said once, in compiler/hlo/opcodes.py, and each module names the function of an opcode
after it (`_dynamic_slice` for dynamic-slice) instead of listing the family again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from compiler.hlo.opcodes import OPCODES

F = TypeVar("F", bound=Callable[..., Any])


def function_name(opcode: str) -> str:
    """The name a family module gives the function of `opcode`."""
    return "_" + opcode.replace("-", "_")


def family_table(family: str, namespace: Mapping[str, Any], shared: Mapping[str, F] | None = None, bound_elsewhere: tuple[str, ...] = ()) -> dict[str, F]:
    """Each opcode of `family`, in registry order, with the function of its name in
    `namespace` (a module's globals()); an opcode without one takes its function from
    `shared` (several opcodes served by one function). `bound_elsewhere` are the family's
    opcodes the module leaves to its caller. A missing function fails at import, so a
    module cannot fall behind the registry."""
    table: dict[str, F] = {}
    for opcode in (op.name for op in OPCODES.values() if op.family == family):
        if opcode in bound_elsewhere:
            continue
        function = namespace.get(function_name(opcode))
        if function is None and shared is not None:
            function = shared.get(opcode)
        if not callable(function):
            raise LookupError(f"the {family} module has no function for {opcode} (named {function_name(opcode)})")
        table[opcode] = function
    return table
