"""Every simplification pass, alone and as the pinned group, keeps the reference outputs of
every fixture bit-identical to the unoptimized module's, and leaves a module that verifies;
the group is deterministic and reaches a fixed point."""

from __future__ import annotations

import copy
import functools

import pytest

from compiler.config import load_config
from compiler.driver import compile_program
from compiler.hlo import canonical_text, load_module, verify_module
from compiler.hlo.editing import all_instructions
from compiler.hlo.ir import Module
from compiler.passes.algebraic_simplifier import AlgebraicSimplifier
from compiler.passes.base import FixedPoint, Pipeline
from compiler.passes.call_inlining import CallInlining
from compiler.passes.common_subexpression_elimination import CommonSubexpressionElimination
from compiler.passes.constant_folding import ConstantFolding
from compiler.passes.dead_code_elimination import DeadCodeElimination
from compiler.passes.dot_orientation import DotOrientation
from compiler.passes.layout_assignment import LayoutAssignment
from compiler.passes.pipeline import default_pipeline
from compiler.passes.shape_canonicalization import ShapeCanonicalization
from compiler.passes.transpose_folding import TransposeFolding
from compiler.passes.tuple_simplification import TupleSimplification
from compiler.program import load_program
from compiler.reference import evaluate
from core.dtypes import ALL_DTYPES
from harness.fixture_data import FIXTURE_NAMES, Fixture
from tests.passes.simplification_helpers import bits

PASSES = [
    LayoutAssignment,
    CallInlining,
    TupleSimplification,
    ConstantFolding,
    AlgebraicSimplifier,
    ShapeCanonicalization,
    DotOrientation,
    TransposeFolding,
    CommonSubexpressionElimination,
    DeadCodeElimination,
]


def _simplification_group() -> FixedPoint:
    stages = default_pipeline().stages
    groups = [s for s in stages if isinstance(s, FixedPoint) and s.name == "simplification"]
    assert len(groups) == 1, "the default pipeline has one simplification group"
    return groups[0]


@functools.cache
def _parsed(name: str) -> Module:
    return load_module(load_program(Fixture(name).module_text).canonical_text)


def _module(fixture: Fixture) -> Module:
    """A fresh copy of the fixture's module as the driver sees it (parsing is the slow part,
    so each fixture is parsed once)."""
    # Element types are singletons compared by identity: the copy shares them.
    return copy.deepcopy(_parsed(fixture.name), {id(d): d for d in ALL_DTYPES})


@functools.cache
def _expected(name: str) -> tuple[bytes, ...]:
    return tuple(bits(a) for a in evaluate(_module(Fixture(name)), Fixture(name).inputs()))


def _assert_same(fixture: Fixture, optimized: Module) -> None:
    verify_module(optimized)
    got = evaluate(optimized, fixture.inputs())
    assert tuple(bits(a) for a in got) == _expected(fixture.name)


def test_the_default_pipeline_runs_every_pass_in_order() -> None:
    names = [p.name for p in _simplification_group().passes]
    assert names == [p.name for p in PASSES]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_simplification_keeps_reference_outputs(name: str) -> None:
    fixture = Fixture(name)
    optimized = Pipeline((_simplification_group(),)).run(_module(fixture))
    _assert_same(fixture, optimized)
    # A fixed point: one more round changes nothing.
    assert not any([p.run(optimized) for p in _simplification_group().passes])
    # Deterministic: a second run from a fresh parse gives the same canonical text.
    again = Pipeline((_simplification_group(),)).run(_module(fixture))
    assert canonical_text(again) == canonical_text(optimized)


@pytest.mark.parametrize("pass_type", PASSES, ids=lambda p: p.name)
def test_each_pass_alone_keeps_reference_outputs(pass_type) -> None:
    for name in FIXTURE_NAMES:
        fixture = Fixture(name)
        module = _module(fixture)
        pass_type().run(module)
        _assert_same(fixture, module)


def _renamed_and_reordered(module: Module) -> Module:
    """The same program with every instruction renamed and each computation's instructions
    listed in reverse (the order of the list carries no meaning before scheduling)."""
    for computation in module.computations:
        for number, instruction in enumerate(computation.instructions):
            instruction.name = (
                f"renamed_{computation.name}_{len(computation.instructions) - number}"
            )
        computation.instructions = list(reversed(computation.instructions))
    return module


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_simplification_ignores_names_and_instruction_order(name: str) -> None:
    fixture = Fixture(name)
    plain = Pipeline((_simplification_group(),)).run(_module(fixture))
    shuffled = Pipeline((_simplification_group(),)).run(_renamed_and_reordered(_module(fixture)))
    assert canonical_text(shuffled) == canonical_text(plain)


# XLA's optimized modules are full of bitcasts between layouts, fusions and copies: the
# hardest input for layout assignment. (large_constant's export elides its constant, and
# XLA:CPU turns topk into a custom call, outside the contract.)
XLA_OPTIMIZED = [
    name for name in FIXTURE_NAMES if "{...}" not in Fixture(name).optimized_text and "custom-call(" not in Fixture(name).optimized_text
]


@pytest.mark.parametrize("name", XLA_OPTIMIZED)
def test_simplification_keeps_xla_optimized_modules_bit_identical(name: str) -> None:
    fixture = Fixture(name)
    inputs = fixture.inputs()
    expected = evaluate(load_module(fixture.optimized_text), inputs)
    optimized = Pipeline((_simplification_group(),)).run(load_module(fixture.optimized_text))
    verify_module(optimized)
    assert "bitcast" not in [i.opcode for _, i in all_instructions(optimized)]
    assert [bits(a) for a in evaluate(optimized, inputs)] == [bits(a) for a in expected]


@pytest.mark.parametrize(
    "name", [n for n in XLA_OPTIMIZED if "bitcast(" in Fixture(n).optimized_text]
)
def test_simplified_xla_modules_run_bit_identically_on_the_backend(name: str) -> None:
    """The simplification group's output, compiled as written (no further pass), gives the
    reference bits of the original module on the LLVM backend."""
    fixture = Fixture(name)
    inputs = fixture.inputs()
    expected = evaluate(load_module(fixture.optimized_text), inputs)
    optimized = Pipeline((_simplification_group(),)).run(load_module(fixture.optimized_text))
    program = load_program(canonical_text(optimized))
    executable = compile_program(program, load_config().with_pipeline("none"), cache_dir=False)
    assert [bits(a) for a in executable.run(*inputs)] == [bits(a) for a in expected]
