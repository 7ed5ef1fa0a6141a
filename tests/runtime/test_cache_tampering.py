"""A compile-cache entry edited by someone who can write the cache (the node's confined
execution process can) and resealed as the cache seals it: whatever then runs from the cache
is never reported under the honest binary_hash with other outputs. binary_hash covers the
object bytes and the plan, and a load recomputes it: a record that states the honest one is
refused and rebuilt, and a record that states the edited plan's runs under another
binary_hash, the one every verifier's recompilation refuses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from compiler.cache import CompileCache, cache_key
from compiler.codegen.plan import Plan, binary_hash
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from harness.fixture_data import Fixture

FIXTURE = Fixture("mlp_softmax")


def without_the_last_step(plan: dict) -> dict:
    return {**plan, "steps": plan["steps"][:-1]}


def another_buffer_as_the_last_output(plan: dict) -> dict:
    """The last output read from another buffer of its type and shape (an intermediate)."""
    buffers = plan["buffers"]
    last = buffers[plan["outputs"][-1]]
    other = next(b[0] for b in buffers if b[0] != last[0] and b[2:4] == last[2:4])
    return {**plan, "outputs": [*plan["outputs"][:-1], other]}


def reseal(content: bytes) -> bytes:
    """A record sealed as compiler/cache.py seals one, written out here as an attacker would."""
    return hashlib.sha256(content).hexdigest().encode() + b"\n" + content


# What the attacker states as the record's binary_hash, given the object bytes, the edited
# plan and the honest binary_hash.
STATED: dict[str, Callable[[bytes, dict, str], str]] = {
    "the honest one": lambda object_bytes, plan, honest: honest,
    "the object's SHA-256 alone": lambda object_bytes, plan, honest: hashlib.sha256(object_bytes).hexdigest(),
    "the edited plan's": lambda object_bytes, plan, honest: binary_hash(object_bytes, Plan.from_json(plan)),
}


@pytest.mark.parametrize("edit", [without_the_last_step, another_buffer_as_the_last_output], ids=lambda e: e.__name__)
@pytest.mark.parametrize("stated", list(STATED))
def test_a_resealed_edited_plan_never_runs_under_the_honest_binary_hash(tmp_path: Path, edit: Callable[[dict], dict], stated: str) -> None:
    program = load_program(FIXTURE.module_text)
    config = load_config()
    honest = compile_program(program, config, cache_dir=tmp_path)
    expected = [o.tobytes() for o in honest.run(*FIXTURE.inputs())]
    key = cache_key(program.hlo_hash, config)
    path = tmp_path / f"{key}.json"
    record = json.loads(path.read_bytes()[65:])
    object_bytes = (tmp_path / f"{key}.o").read_bytes()
    edited = edit(record["plan"])
    assert edited != record["plan"]
    record["plan"] = edited
    record["binary_hash"] = STATED[stated](object_bytes, edited, honest.hashes["binary_hash"])
    path.write_bytes(reseal(json.dumps(record).encode()))

    again = compile_program(program, config, cache_dir=tmp_path)
    outputs = [o.tobytes() for o in again.run(*FIXTURE.inputs())]
    # The property: never the honest identity with other outputs.
    assert again.hashes["binary_hash"] != honest.hashes["binary_hash"] or outputs == expected
    if stated == "the edited plan's":
        # Loaded as stated (the key cannot tell an edited plan from the honest one), but under
        # the edited plan's binary_hash, which a fresh compilation (a verifier's) never gives.
        assert again.hashes["binary_hash"] == record["binary_hash"] != honest.hashes["binary_hash"]
        assert compile_program(program, config, cache_dir=False).hashes == honest.hashes
        assert outputs != expected  # the edit did change what runs
    else:
        # The stated hash is not the one the object and plan as read give: damaged, rebuilt.
        assert again.hashes == honest.hashes and outputs == expected
        assert CompileCache(tmp_path).get(key) is not None
        assert Plan.from_json(json.loads(path.read_bytes()[65:])["plan"]).canonical_bytes() == honest.plan.canonical_bytes()


def test_binary_hash_covers_the_object_and_the_plan() -> None:
    """binary_hash changes with any byte of the object and any field of the plan, and a plan
    read back from its JSON gives the hash it was written with."""
    executable = compile_program(load_program(FIXTURE.module_text), load_config(), cache_dir=False)
    object_bytes, plan = executable.object_bytes, executable.plan
    honest = binary_hash(object_bytes, plan)
    assert executable.hashes["binary_hash"] == honest != hashlib.sha256(object_bytes).hexdigest()
    assert binary_hash(object_bytes, Plan.from_json(json.loads(json.dumps(plan.to_json())))) == honest
    flipped = bytearray(object_bytes)
    flipped[len(flipped) // 2] ^= 1
    assert binary_hash(bytes(flipped), plan) != honest
    for edit in (without_the_last_step, another_buffer_as_the_last_output, lambda p: {**p, "arena_bytes": p["arena_bytes"] + 64}):
        assert binary_hash(object_bytes, Plan.from_json(edit(plan.to_json()))) != honest
