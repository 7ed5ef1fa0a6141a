"""The opcode tables of the op family modules (the verifier's shape rules, the reference's
handlers, the backend's emitters), derived from the registry: which opcodes a family holds
is said once, in compiler/hlo/opcodes.py, and each module names the function of an opcode
after it (`_dynamic_slice` for dynamic-slice) instead of listing the family again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from compiler.hlo.opcodes import OPCODES

F = TypeVar("F", bound=Callable[..., Any])


def function_name(opcode: str, prefix: str = "_") -> str:
    """The name a family module gives the function of `opcode` (`prefix`: "_" in the
    verifier and the reference, "_emit_" in the backend)."""
    return prefix + opcode.replace("-", "_")


def family_table(family: str, namespace: Mapping[str, Any], shared: Mapping[str, F] | None = None, bound_elsewhere: tuple[str, ...] = (), prefix: str = "_") -> dict[str, F]:
    """Each opcode of `family`, in registry order, with the function of its name in
    `namespace` (a module's globals(), or {} where `shared` serves them all); an opcode
    without one takes its function from `shared` (several opcodes served by one function,
    or functions made per opcode). `bound_elsewhere` are the family's opcodes the module
    leaves to its caller. A missing function, or a `shared` entry for an opcode of another
    family, fails at import, so a module cannot fall behind the registry."""
    opcodes = [op.name for op in OPCODES.values() if op.family == family]
    stray = sorted(set(shared or ()) - set(opcodes))
    if stray:
        raise LookupError(f"the {family} module has functions for {', '.join(stray)}, of no opcode of that family")
    table: dict[str, F] = {}
    for opcode in opcodes:
        if opcode in bound_elsewhere:
            continue
        function = namespace.get(function_name(opcode, prefix))
        if function is None and shared is not None:
            function = shared.get(opcode)
        if not callable(function):
            raise LookupError(f"the {family} module has no function for {opcode} (named {function_name(opcode, prefix)})")
        table[opcode] = function
    return table
