"""The canonical text, and so hlo_hash, depends only on what a module computes."""

from __future__ import annotations

import pytest

from compiler.hlo import canonical_text, load_module
from compiler.program import load_program
from harness.fixture_data import FIXTURE_NAMES, Fixture
from tests.hlo_variants import add_metadata, rename_instructions, reverse_independent_parameters


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_hlo_hash_ignores_names_order_metadata_and_whitespace(name: str) -> None:
    text = Fixture(name).module_text
    baseline = load_program(text).hlo_hash
    variants = {
        "renamed": rename_instructions(text),
        "reordered": reverse_independent_parameters(text),
        "metadata": add_metadata(text),
        "whitespace": text.replace(", ", ",  ").replace("\n", "\n\n"),
    }
    for kind, variant in variants.items():
        assert variant != text, kind
        assert load_program(variant).hlo_hash == baseline, kind
        assert load_program(variant).source_hash != load_program(text).source_hash, kind


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_printing_is_a_fixed_point(name: str) -> None:
    first = canonical_text(load_module(Fixture(name).module_text))
    second = canonical_text(load_module(first))
    assert first == second


def test_semantic_changes_change_the_hash() -> None:
    base = """HloModule m
ENTRY e {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} parameter(1)
  ROOT c = f32[4]{0} subtract(a, b)
}
"""
    swapped = base.replace("subtract(a, b)", "subtract(b, a)")
    other_op = base.replace("subtract", "add")
    constant = base.replace("b = f32[4]{0} parameter(1)", "b = f32[4]{0} constant({1, 2, 3, 4})")
    constant2 = constant.replace("{1, 2, 3, 4}", "{1, 2, 3, 5}")
    hashes = {load_program(t).hlo_hash for t in (base, swapped, other_op, constant, constant2)}
    assert len(hashes) == 5


def test_a_parameter_layout_is_part_of_the_program() -> None:
    row_major = "HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{1,0} parameter(0)\n}\n"
    column_major = row_major.replace("{1,0}", "{0,1}")
    implicit = row_major.replace("{1,0}", "")
    assert load_program(row_major).hlo_hash != load_program(column_major).hlo_hash
    assert load_program(row_major).hlo_hash == load_program(implicit).hlo_hash


def test_dead_code_and_unused_computations_do_not_change_the_hash() -> None:
    base = """HloModule m
ENTRY e {
  a = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(a)
}
"""
    with_dead = """HloModule m
unused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
ENTRY e {
  a = f32[4]{0} parameter(0)
  dead = f32[4]{0} exponential(a)
  ROOT n = f32[4]{0} negate(a)
}
"""
    assert load_program(with_dead).hlo_hash == load_program(base).hlo_hash


def test_hlo_hash_is_the_same_in_another_process() -> None:
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from compiler.program import load_program\n"
        "from harness.fixture_data import all_fixtures\n"
        "print(json.dumps({f.name: load_program(f.module_text).hlo_hash for f in all_fixtures()}))\n"
    )
    env_root = str(Fixture(FIXTURE_NAMES[0]).directory.parents[2])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=env_root)
    other = json.loads(result.stdout)
    assert other == {name: load_program(Fixture(name).module_text).hlo_hash for name in FIXTURE_NAMES}
