"""The opcode registry (compiler/hlo/opcodes.py) is the one list: the verifier, the reference
evaluator and the LLVM backend cover exactly its opcodes, each under its family, in modules
named after the family."""

from __future__ import annotations

import pytest

from compiler import driver, reference
from compiler.hlo import verifier
from compiler.hlo.opcodes import (
    ALIASING,
    COMPUTED_PER_ELEMENT,
    FAMILIES,
    INDEX_MAPPING,
    NOT_TRACED,
    OPCODES,
    SUPPORTED,
    UNSUPPORTED_REASONS,
    opcodes_where,
)

# Bound by the evaluator and the lowering themselves, not by a family module.
BOUND_BY_THE_WALK = {"parameter"}


def family(name: str) -> set[str]:
    return set(opcodes_where(family=name))


def test_every_opcode_has_a_known_family_and_nothing_is_both_supported_and_refused() -> None:
    assert {op.family for op in OPCODES.values()} == set(FAMILIES)
    assert all(name == op.name for name, op in OPCODES.items())
    assert not SUPPORTED & set(UNSUPPORTED_REASONS)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_verifier_groups_its_shape_rules_by_the_registry_family(name: str) -> None:
    assert set(verifier.RULES_BY_FAMILY) == set(FAMILIES)
    assert set(verifier.RULES_BY_FAMILY[name]) == family(name)


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
