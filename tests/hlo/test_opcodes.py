"""The opcode registry (compiler/hlo/opcodes.py) is the one list: the verifier, the reference
evaluator and the LLVM backend cover exactly its opcodes, each under its family, in modules
named after the family; the per-opcode facts the verifier checks (operand types, 8-bit float
and complex values) are the registry's."""

from __future__ import annotations

import pytest

from compiler import driver, reference
from compiler.hlo import verifier
from compiler.hlo.family_tables import family_table
from compiler.hlo.opcodes import (
    ALIASING,
    COMPLEX_OPCODES,
    COMPUTED_PER_ELEMENT,
    FAMILIES,
    FLOAT8_OPCODES,
    INDEX_MAPPING,
    NOT_TRACED,
    OPCODES,
    OPERAND_TYPES,
    SUPPORTED,
    UNSUPPORTED_REASONS,
    opcodes_where,
)
from compiler.hlo.verifier.checks import OPERAND_TYPE_CHECKS

# Bound by the evaluator and the lowering themselves, not by a family module.
BOUND_BY_THE_WALK = {"parameter"}


def family(name: str) -> set[str]:
    return set(opcodes_where(family=name))


def test_every_opcode_has_a_known_family_and_nothing_is_both_supported_and_refused() -> None:
    assert {op.family for op in OPCODES.values()} == set(FAMILIES)
    assert all(name == op.name for name, op in OPCODES.items())
    assert not SUPPORTED & set(UNSUPPORTED_REASONS)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_verifier_checks_each_family_in_the_module_of_that_name(name: str) -> None:
    module = verifier.FAMILY_MODULES[name]
    assert module.__name__ == f"compiler.hlo.verifier.{name}"
    assert set(module.RULES) == family(name)
    assert verifier.RULES_BY_FAMILY[name] is module.RULES


def test_the_verifier_rules_cover_exactly_the_registry() -> None:
    assert tuple(verifier.RULES_BY_FAMILY) == FAMILIES
    rules = [opcode for module in verifier.FAMILY_MODULES.values() for opcode in module.RULES]
    assert len(rules) == len(set(rules))
    assert set(rules) == SUPPORTED


def test_a_family_table_follows_the_registry_and_misses_nothing() -> None:
    def _reduce() -> None: ...
    def _reduce_window() -> None: ...
    def _shared() -> None: ...

    table = family_table("reductions", {"_reduce": _reduce, "_reduce_window": _reduce_window}, shared={"select-and-scatter": _shared})
    assert table == {"reduce": _reduce, "reduce-window": _reduce_window, "select-and-scatter": _shared}
    with pytest.raises(LookupError, match="select-and-scatter"):
        family_table("reductions", {"_reduce": _reduce, "_reduce_window": _reduce_window})
    assert family_table("reductions", {"_reduce": _reduce}, bound_elsewhere=("reduce-window", "select-and-scatter")) == {"reduce": _reduce}


def test_every_operand_type_class_is_checked_by_the_verifier() -> None:
    assert set(OPERAND_TYPE_CHECKS) == set(OPERAND_TYPES)
    assert {op.operand_types for op in OPCODES.values()} == set(OPERAND_TYPES)
    # Only elementwise opcodes (and iota, whose values are numbers) name a class other than
    # "any"; the others check their types in their own shape rules (topk takes pred too).
    typed = {name for name, op in OPCODES.items() if op.operand_types != "any"}
    assert typed - family("elementwise") == {"iota"}


def test_the_8_bit_float_and_complex_opcodes_are_derived_from_the_registry() -> None:
    assert opcodes_where(float8=True) == FLOAT8_OPCODES
    assert opcodes_where(complex=True) == COMPLEX_OPCODES
    # The ops that only move values take both (iota makes numbers; scan takes neither).
    movers = (family("data_movement") | family("control_flow")) - {"iota", "scan"}
    assert movers <= FLOAT8_OPCODES & COMPLEX_OPCODES
    assert ALIASING <= FLOAT8_OPCODES & COMPLEX_OPCODES
    # 8-bit floats are converted, moved and multiplied in dots, nothing else: no opcode
    # restricted to some types computes on them.
    assert FLOAT8_OPCODES - movers == {"convert", "bitcast-convert", "copy", "select", "dot", "gather"}
    assert all(OPCODES[name].operand_types == "any" for name in FLOAT8_OPCODES)
    # Complex values never meet an op defined on floats, integers or bits only.
    assert all(OPCODES[name].operand_types in ("any", "numeric", "complex_or_float", "complex_parts") for name in COMPLEX_OPCODES)
    assert {"bitcast-convert"} == FLOAT8_OPCODES - COMPLEX_OPCODES


@pytest.mark.parametrize("name", FAMILIES)
def test_the_reference_evaluates_each_family_in_the_module_of_that_name(name: str) -> None:
    module = reference.FAMILY_MODULES[name]
    assert module.__name__ == f"compiler.reference.{name}"
    assert set(module.HANDLERS) == family(name) - BOUND_BY_THE_WALK


@pytest.mark.parametrize("name", FAMILIES)
def test_the_backend_emits_each_family_in_the_module_of_that_name(name: str) -> None:
    module = driver.FAMILY_MODULES[name]
    assert module.__name__ == f"compiler.codegen.{name}"
    assert set(module.EMITTERS) == family(name) - BOUND_BY_THE_WALK


def test_the_derived_sets_are_consistent() -> None:
    assert family("data_movement") >= INDEX_MAPPING
    assert NOT_TRACED <= ALIASING
    assert family("elementwise") >= COMPUTED_PER_ELEMENT
    assert not COMPUTED_PER_ELEMENT & ALIASING
    # Every elementwise opcode with a fixed operand count is checked as unary or binary, or
    # is one of the three-operand ones.
    fixed = {op.name: op.operands for op in OPCODES.values() if op.operands is not None}
    assert {name for name, count in fixed.items() if count == 3} == {"select", "clamp"}
