"""The compile cache: hits load the same bytes, tampered entries are not used, and text compiled
before is found without parsing it again."""

from __future__ import annotations

import json

import pytest

import compiler
from compiler import driver
from compiler import program as program_module
from compiler.cache import CompileCache, cache_key, source_key
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.hlo import HloError, canonical_text
from compiler.program import Program, load_program
from harness.fixture_data import Fixture


def test_hit_returns_the_same_executable_and_tampering_is_detected(tmp_path) -> None:
    fixture = Fixture("mlp_softmax")
    program = load_program(fixture.module_text)
    config = load_config()
    first = compile_program(program, config, cache_dir=tmp_path)
    cache = CompileCache(tmp_path)
    key = cache_key(program.hlo_hash, config)
    assert (tmp_path / f"{key}.o").read_bytes() == first.object_bytes
    second = compile_program(program, config, cache_dir=tmp_path)
    assert second.hashes == first.hashes
    assert [o.tobytes() for o in second.run(*fixture.inputs())] == [o.tobytes() for o in first.run(*fixture.inputs())]
    assert cache.get(key) is not None and cache.hits == 1
    # Flip one byte of the stored object: the entry no longer matches its binary_hash.
    data = bytearray((tmp_path / f"{key}.o").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / f"{key}.o").write_bytes(bytes(data))
    assert cache.get(key) is None
    third = compile_program(program, config, cache_dir=tmp_path)
    assert third.hashes == first.hashes  # recompiled, not loaded from the bad entry


def test_a_compilation_tells_its_stages_and_a_cache_hit_none(tmp_path) -> None:
    """`progress` hears the stages of a compilation in order (what `vxla compile` shows on a
    terminal), and nothing when the cache has the module."""
    program = load_program(Fixture("mlp_softmax").module_text)
    config = load_config()
    stages: list[str] = []
    compile_program(program, config, cache_dir=tmp_path, progress=stages.append)
    assert stages[0] == "optimizing (default pipeline)"
    assert any(stage.startswith("optimizing: scheduling") for stage in stages)
    # The last stage counts what LLVM compiles: the plan's distinct kernels and its steps.
    plan = compile_program(program, config, cache_dir=False).plan
    kernels = len({step.kernel for step in plan.steps if hasattr(step, "kernel")})
    assert kernels > 1
    assert stages[-1] == f"generating machine code for {config.cpu}: {kernels} kernels, {len(plan.steps)} steps"
    again: list[str] = []
    compile_program(program, config, cache_dir=tmp_path, progress=again.append)
    assert again == []


def test_a_damaged_plan_is_never_run(tmp_path) -> None:
    """The stored plan changed on disk (bit rot in its outputs list, here), the object and its
    hashes intact: the entry is damaged, rebuilt, and the run gives the right outputs. The
    plan decides what is read back as outputs, and so what a node signs."""
    fixture = Fixture("mlp_softmax")
    program = load_program(fixture.module_text)
    config = load_config()
    first = compile_program(program, config, cache_dir=tmp_path)
    expected = [o.tobytes() for o in first.run(*fixture.inputs())]
    key = cache_key(program.hlo_hash, config)
    path = tmp_path / f"{key}.json"
    intact = path.read_bytes()
    outputs = json.loads(intact[65:])["plan"]["outputs"]
    assert f'"outputs": {json.dumps(outputs)}'.encode() in intact
    for damaged in (
        intact.replace(f'"outputs": {json.dumps(outputs)}'.encode(), f'"outputs": {json.dumps(outputs[::-1] + [0])}'.encode()),
        intact[:-1],  # cut short
        intact[:10] + bytes([intact[10] ^ 1]) + intact[11:],  # the seal itself
    ):
        path.write_bytes(damaged)
        cache = CompileCache(tmp_path)
        assert cache.get(key) is None and cache.damaged == 1
        again = compile_program(program, config, cache_dir=tmp_path)
        assert again.hashes == first.hashes
        assert [o.tobytes() for o in again.run(*fixture.inputs())] == expected
        assert path.read_bytes() == intact  # rebuilt
    # An entry's files under another key (entries swapped) are not that key's entry.
    other = cache_key("0" * 64, config)
    (tmp_path / f"{other}.json").write_bytes(intact)
    (tmp_path / f"{other}.o").write_bytes((tmp_path / f"{key}.o").read_bytes())
    cache = CompileCache(tmp_path)
    assert cache.get(other) is None and cache.damaged == 1


def test_key_depends_on_the_whole_config() -> None:
    config = load_config().with_target(cpu="x86-64-v3")
    keys = {cache_key("a" * 64, config), cache_key("b" * 64, config), cache_key("a" * 64, config.with_target(cpu="x86-64-v4"))}
    assert len(keys) == 3


def test_a_hit_on_text_compiled_before_parses_nothing(tmp_path, monkeypatch) -> None:
    fixture = Fixture("mlp_softmax")
    first = compiler.compile(fixture.module_text, cache_dir=tmp_path)

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("the module was parsed again")

    with monkeypatch.context() as patched:
        patched.setattr(driver, "load_program", no_parsing)
        patched.setattr(program_module, "load_module", no_parsing)
        second = compiler.compile(fixture.module_text, cache_dir=tmp_path)
        assert second.hashes == first.hashes
        assert [o.tobytes() for o in second.run(*fixture.inputs())] == [o.tobytes() for o in first.run(*fixture.inputs())]
    # The recalled program parses its module when asked for, to the same module.
    assert second.program.hlo_hash == load_program(fixture.module_text).hlo_hash
    assert canonical_text(second.program.module) == load_program(fixture.module_text).canonical_text


def test_an_unreadable_source_record_means_parsing_again(tmp_path, monkeypatch) -> None:
    fixture = Fixture("mlp_softmax")
    first = compiler.compile(fixture.module_text, cache_dir=tmp_path)
    source_hash = load_program(fixture.module_text).source_hash
    record = tmp_path / f"{source_key(source_hash)}.hlo"
    intact = record.read_bytes()
    assert intact.endswith(first.hashes["hlo_hash"].encode())
    record.write_text("not a digest")
    assert CompileCache(tmp_path).recall_hlo_hash(source_hash) is None
    # One flipped digit of the recorded hlo_hash (still a digest): damaged, not believed.
    flipped = bytearray(intact)
    flipped[-1] = ord("0") if flipped[-1] != ord("0") else ord("1")
    record.write_bytes(bytes(flipped))
    cache = CompileCache(tmp_path)
    assert cache.recall_hlo_hash(source_hash) is None and cache.damaged == 1
    parsed: list[bytes] = []
    real = driver.load_program

    def counting(source):
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(driver, "load_program", counting)
    second = compiler.compile(fixture.module_text, cache_dir=tmp_path)
    assert len(parsed) == 1 and second.hashes == first.hashes
    assert record.read_bytes() == intact  # recorded again


def test_text_that_fails_to_parse_is_never_recorded(tmp_path) -> None:
    bad = b"HloModule broken\n\nENTRY main {\n  ROOT x = f32[] nonsense()\n}\n"
    with pytest.raises(HloError):
        compiler.compile(bad, cache_dir=tmp_path)
    assert CompileCache(tmp_path).recall_hlo_hash(Program(bad).source_hash) is None
    assert not list(tmp_path.glob("*"))
