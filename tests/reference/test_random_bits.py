"""rng-bit-generator: the generators against the published known-answer vectors of
ThreeFry-2x32-20 and Philox-4x32-10 (Random123), and whole rng-bit-generator results (every
algorithm, state size, element type and several shapes, counters that wrap included)
against XLA:CPU's, as tools/export_rng_cases.py recorded them: the reference evaluator on
every case, the LLVM backend on every case on one target and on a sample of cases on every
target of the host's architecture with 1, 2 and 4 threads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.reference import evaluate
from compiler.reference.random_bits import philox4x32, threefry2x32
from harness.fixture_data import FIXTURES
from harness.targets import DEFAULT, executable_for, run_everywhere

CASES = json.loads((FIXTURES / "rng_bit_generator_xla.json").read_text())["cases"]
M = 0xFFFFFFFF


def _words(values: list[int]) -> list[np.ndarray]:
    return [np.array([v], dtype=np.uint32) for v in values]


@pytest.mark.parametrize(
    ("counter", "key", "expected"),
    [
        ((0, 0), 0, (0x6B200159, 0x99BA4EFE)),
        ((M, M), 2**64 - 1, (0x1CB996FC, 0xBB002BE7)),
        ((0x243F6A88, 0x85A308D3), 0x03707344 << 32 | 0x13198A2E, (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry_known_answers(counter: tuple[int, int], key: int, expected: tuple[int, int]) -> None:
    assert tuple(int(w[0]) for w in threefry2x32(*_words(list(counter)), key)) == expected


@pytest.mark.parametrize(
    ("counter", "key", "expected"),
    [
        ((0, 0, 0, 0), 0, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((M, M, M, M), 2**64 - 1, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), 0x299F31D0 << 32 | 0xA4093822, (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ],
)
def test_philox_known_answers(counter: tuple[int, ...], key: int, expected: tuple[int, ...]) -> None:
    assert tuple(int(w[0]) for w in philox4x32(_words(list(counter)), key)) == expected


def _as_recorded(outputs: list[np.ndarray]) -> tuple[list[int], list[int]]:
    new_state, bits = outputs
    return new_state.tolist(), bits.reshape(-1).view(np.dtype(f"u{bits.dtype.itemsize}")).tolist()


def test_there_are_cases_of_every_algorithm() -> None:
    algorithms = {case["hlo"].split("algorithm=")[1].split()[0] for case in CASES}
    assert algorithms == {"rng_three_fry", "rng_philox", "rng_default"} and len(CASES) == 240


def test_the_reference_gives_xla_cpu_bits() -> None:
    for case in CASES:
        outputs = evaluate(case["hlo"], [np.array(case["state"], dtype=np.uint64)])
        assert _as_recorded(outputs) == (case["new_state"], case["bits"]), case["hlo"]


def test_the_backend_gives_xla_cpu_bits() -> None:
    """Every fourth case (a compile each; the reference gives all 240 XLA's bits above):
    every algorithm and output element type is still among them."""
    sample = CASES[::4]
    assert {c["hlo"].split("algorithm=")[1].split()[0] for c in sample} == {"rng_three_fry", "rng_philox", "rng_default"}
    for case in sample:
        executable = executable_for(case["hlo"], DEFAULT)
        assert executable is not None
        outputs = executable.run(np.array(case["state"], dtype=np.uint64), threads=2)
        assert _as_recorded(outputs) == (case["new_state"], case["bits"]), case["hlo"]


@pytest.mark.parametrize("number", range(0, 240, 17))
def test_the_backend_matches_the_reference_everywhere(number: int) -> None:
    case = CASES[number]
    run_everywhere(case["hlo"], [np.array(case["state"], dtype=np.uint64)])


def test_dropout_masks_from_random_bits_as_jax_writes_them() -> None:
    """jax.random with the rbg implementation: a u32[4] key bitcast to the u64[2] state,
    bits turned into floats in [1, 2) and compared with the keep probability."""
    text = """HloModule t
ENTRY e {
  k = u32[4]{0} parameter(0)
  x = f32[64,33]{1,0} parameter(1)
  r = u32[2,2]{1,0} reshape(k)
  s = u64[2]{0} bitcast-convert(r)
  g = (u64[2]{0}, u32[64,33]{1,0}) rng-bit-generator(s), algorithm=rng_default
  bits = u32[64,33]{1,0} get-tuple-element(g), index=1
  nine = u32[] constant(9)
  nb = u32[64,33]{1,0} broadcast(nine), dimensions={}
  m = u32[64,33]{1,0} shift-right-logical(bits, nb)
  one = u32[] constant(1065353216)
  ob = u32[64,33]{1,0} broadcast(one), dimensions={}
  o = u32[64,33]{1,0} or(m, ob)
  f = f32[64,33]{1,0} bitcast-convert(o)
  p = f32[] constant(1.9)
  pb = f32[64,33]{1,0} broadcast(p), dimensions={}
  keep = pred[64,33]{1,0} compare(f, pb), direction=LT
  z = f32[] constant(0)
  zb = f32[64,33]{1,0} broadcast(z), dimensions={}
  ROOT d = f32[64,33]{1,0} select(keep, x, zb)
}
"""
    rng = np.random.default_rng(11)
    run_everywhere(text, [rng.integers(0, 2**32, size=4, dtype=np.uint32), rng.standard_normal((64, 33)).astype(np.float32)])
