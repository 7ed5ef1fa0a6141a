"""node.daemon.job_checks: a module the node has checked before is not parsed again, and the
limits still hold for it."""

from __future__ import annotations

import dataclasses

import pytest

from compiler import program as program_module
from harness.fixture_data import Fixture
from node.daemon.config import Limits
from node.daemon.job_checks import KnownModules, check_module
from node.errors import JobRejected

MLP = Fixture("mlp_softmax")


def counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    parsed: list[bytes] = []
    real = program_module.load_program

    def load(source: bytes | str) -> program_module.Program:
        parsed.append(bytes(source) if isinstance(source, bytes) else source.encode())
        return real(source)

    monkeypatch.setattr("node.daemon.job_checks.load_program", load)
    return parsed


def test_known_modules_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = counting_parses(monkeypatch)
    known = KnownModules()
    module = MLP.module_text.encode()
    first = check_module(module, Limits(), known)
    again = check_module(bytes(module), Limits(), known)  # equal bytes, another object
    assert again is first and len(parsed) == 1
    check_module(module + b"\n", Limits(), known)  # other bytes: parsed
    assert len(parsed) == 2
    check_module(module, Limits())  # without the memory: parsed every time
    assert len(parsed) == 3


def test_limits_hold_for_a_known_module() -> None:
    known = KnownModules()
    module = MLP.module_text.encode()
    check_module(module, Limits(), known)
    with pytest.raises(JobRejected, match="limits.max_flops") as refused:
        check_module(module, dataclasses.replace(Limits(), max_flops=1), known)
    assert refused.value.status == 422
    with pytest.raises(JobRejected, match="limits.max_module_bytes"):
        check_module(module, dataclasses.replace(Limits(), max_module_bytes=10), known)


def test_a_module_that_fails_to_parse_is_not_remembered() -> None:
    known = KnownModules()
    for _ in range(2):
        with pytest.raises(JobRejected, match="line 2, column 7"):
            check_module(b"HloModule broken\nENTRY {", Limits(), known)
    assert known.recall(b"HloModule broken\nENTRY {") is None


def test_the_memory_is_bounded_in_entries_and_bytes() -> None:
    module = MLP.module_text.encode()
    variants = [module + b"\n" * i for i in range(1, 5)]
    by_entries = KnownModules(entries=2)
    for variant in variants:
        check_module(variant, Limits(), by_entries)
    assert [by_entries.recall(v) is not None for v in variants] == [False, False, True, True]
    by_bytes = KnownModules(source_bytes=2 * len(module) + 5)
    for variant in variants:
        check_module(variant, Limits(), by_bytes)
    assert [by_bytes.recall(v) is not None for v in variants] == [False, False, False, True]
