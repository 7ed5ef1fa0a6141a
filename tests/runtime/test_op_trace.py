"""Op-level tracing in the runtime: every traced instruction's digest is taken as soon as it
is computed (before buffer reuse can overwrite it), equals the digest of that instruction's
value under the reference evaluator, and a fault injected into one instruction shows first
at exactly that instruction."""

from __future__ import annotations

import pytest

from attest.digests import tensor_digest, tuple_digest
from compiler.config import load_config
from compiler.driver import compile_program, optimize
from compiler.hlo.printer import canonical_names
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.reference.evaluator import flatten_value
from compiler.runtime.executable import Fault
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.targets import session_cache
from tests.codegen.test_fixtures_backend import assert_identical, reference_outputs


def _reference_digests(name: str) -> dict[str, str]:
    """Digest of every entry instruction's value in the optimized module, by canonical name,
    as the reference evaluator computes it."""
    fixture = Fixture(name)
    module = optimize(load_program(fixture.module_text), load_config())
    names = canonical_names(module.entry)
    digests: dict[str, str] = {}

    def observe(instruction, value) -> None:  # noqa: ANN001
        if id(instruction) in names:
            parts = [tensor_digest(v) for v in flatten_value(value)]
            digests[names[id(instruction)]] = parts[0] if len(parts) == 1 else tuple_digest(parts)

    evaluate(module, fixture.inputs(), observer=observe)
    return digests


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_traced_digests_equal_the_reference_values_and_a_fault_shows_where_it_was_made(name: str) -> None:
    fixture = Fixture(name)
    executable = compile_program(load_program(fixture.module_text), load_config(), cache_dir=session_cache())
    traced = executable.run_traced(*fixture.inputs(), threads=2)
    assert_identical(traced.outputs, reference_outputs(fixture), name)
    expected = _reference_digests(name)
    assert traced.instructions, name
    for instruction, opcode, digest in traced.instructions:
        assert digest == expected[instruction], (name, instruction, opcode)
    # A flipped bit in one computed value: the first differing digest is that instruction's.
    # (A bit can be invisible, e.g. in a NaN's payload: then the next candidate bit is tried.)
    points = [p for p in executable.plan.trace_points if executable.plan.buffers[p.buffers[0]].kind == "arena"]
    target = points[len(points) // 2]
    size = executable.plan.buffers[target.buffers[0]].nbytes * 8
    for bit in sorted({b % size for b in (5, 30, 62, 7, size - 2, size // 2 + 3)}):
        faulty = executable.run_traced(*fixture.inputs(), fault=Fault(target.name, bit))
        differing = [i for i, (a, b) in enumerate(zip(traced.instructions, faulty.instructions, strict=True)) if a[2] != b[2]]
        if differing:
            assert traced.instructions[differing[0]][0] == target.name, (name, bit)
            return
    raise AssertionError(f"{name}: no candidate bit of {target.name} changed its digest")


def test_a_fault_on_an_unknown_instruction_is_refused() -> None:
    fixture = Fixture("mlp_softmax")
    executable = compile_program(load_program(fixture.module_text), load_config(), cache_dir=False)
    with pytest.raises(ValueError, match="no traced instruction 'nope'"):
        executable.run_traced(*fixture.inputs(), fault=Fault("nope"))
