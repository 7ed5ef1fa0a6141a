"""canonical_copy (compiler/hlo/printer.py) makes, without printing and parsing, the module
that parsing the canonical text gives: the pass pipeline rewrites that copy, so a program is
parsed once. Checked structurally (every computation, instruction, operand, attribute and
literal) on every fixture, XLA's optimized form of each, the spelling variants and generated
programs, and on what the default pipeline makes of either."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from compiler.config import load_config
from compiler.hlo import HloError, load_module
from compiler.hlo.attributes import format_attribute
from compiler.hlo.ir import Module
from compiler.hlo.printer import canonical_copy, canonical_text
from compiler.passes.pipeline import pipeline_named
from harness.fixture_data import all_fixtures
from harness.fuzzing import fuzz_settings
from harness.program_generator import programs
from tests.hlo_variants import add_metadata, rename_instructions, reverse_independent_parameters


def describe(module: Module) -> list[object]:
    """Everything a pass or the backend can read of a module, by name and value."""
    names = {id(c): c.name for c in module.computations}
    described: list[object] = [module.name, module.entry.name, str(module.entry_layout)]
    for computation in module.computations:
        described.append((computation.name, computation.root.name, computation.scheduled))
        for instruction in computation.instructions:
            attrs = {key: format_attribute(value, lambda c: names[id(c)]) for key, value in instruction.attrs.items()}
            literal = None if instruction.literal is None else (instruction.literal.dtype.str, instruction.literal.shape, instruction.literal.tobytes())
            described.append((
                instruction.name, instruction.opcode, str(instruction.shape), [op.name for op in instruction.operands],
                sorted(attrs.items()), literal, instruction.parameter_number, sorted(instruction.ignored_attrs.items()),
            ))  # fmt: skip
    return described


def assert_copy_is_the_reparse(module: Module) -> None:
    copied = canonical_copy(module)
    assert describe(copied) == describe(load_module(canonical_text(module)))
    if not module.entry.scheduled:  # a parsed module: its schedule is the text's post order
        assert canonical_text(copied) == canonical_text(module)


def _loads(text: str) -> bool:
    try:
        load_module(text)
    except HloError:  # XLA's optimized form of a few: elided constants, custom calls
        return False
    return True


TEXTS = {
    **{f"{f.name}": f.module_text for f in all_fixtures()},
    **{
        f"{f.name}-xla-optimized": text
        for f in all_fixtures()
        if (f.directory / "xla_optimized.hlo").is_file() and _loads(text := (f.directory / "xla_optimized.hlo").read_text())
    },
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_the_copy_of_a_fixture_is_its_reparsed_canonical_text(name: str) -> None:
    module = load_module(TEXTS[name])
    assert_copy_is_the_reparse(module)
    optimized = pipeline_named(load_config().pipeline).run(canonical_copy(module))
    assert_copy_is_the_reparse(optimized)
    # The program's own module is left as it was.
    assert canonical_text(module) == canonical_text(load_module(TEXTS[name]))


@pytest.mark.parametrize("variant", [rename_instructions, reverse_independent_parameters, add_metadata])
def test_spelling_variants_copy_alike(variant) -> None:  # noqa: ANN001
    text = variant(TEXTS["mlp_softmax"])
    assert_copy_is_the_reparse(load_module(text))
    assert canonical_text(canonical_copy(load_module(text))) == canonical_text(load_module(TEXTS["mlp_softmax"]))


@fuzz_settings(40)
@given(programs())
def test_the_copy_of_a_generated_program_is_its_reparsed_canonical_text(text: str) -> None:
    assert_copy_is_the_reparse(load_module(text))


def test_the_comparison_sees_a_difference() -> None:
    module = load_module(TEXTS["mlp_softmax"])
    copied = canonical_copy(module)
    copied.entry.instructions[-1].attrs["extra"] = 1
    assert describe(copied) != describe(load_module(canonical_text(module)))
    assert Path(__file__).name.startswith("test_")
