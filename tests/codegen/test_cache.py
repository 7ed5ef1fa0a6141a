"""The compile cache: hits load the same bytes, tampered entries are not used."""

from __future__ import annotations

from compiler.cache import CompileCache, cache_key
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from tests.fixture_data import Fixture


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


def test_key_depends_on_the_whole_config() -> None:
    config = load_config()
    keys = {cache_key("a" * 64, config), cache_key("b" * 64, config), cache_key("a" * 64, config.with_target(cpu="x86-64-v4"))}
    assert len(keys) == 3
