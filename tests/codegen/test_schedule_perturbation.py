"""The schedule perturbation (CompilerConfig.schedule_perturbation), a test setting: off, it
is not there at all (no code, no field in the recorded config, the same digest and bytes);
on, it is part of the config's identity, splits every kernel as finely as it goes, and a run
takes a seed for its delays; a seed without it is refused. The contention test
(tests/codegen/test_contention.py) is what it is for."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen import plan as P
from compiler.config import CompilerConfig
from compiler.driver import compile_program, generate
from compiler.errors import ArgumentError
from compiler.program import load_program
from harness.hlo_fragments import scalar_binary
from harness.targets import DEFAULT, config

# Three steps that split their work: a transpose, a reduce and an elementwise op after it.
MODULE = "HloModule perturbed\n" + scalar_binary("add", "f32", "add", lhs="x", rhs="y") + """ENTRY main {
  a = f32[96,80] parameter(0)
  t = f32[80,96] transpose(a), dimensions={1,0}
  zero = f32[] constant(0)
  rows = f32[80] reduce(t, zero), dimensions={1}, to_apply=add
  ROOT out = f32[80] sqrt(f32[80] abs(rows))
}
"""


def test_off_it_leaves_no_trace() -> None:
    target = config(DEFAULT)
    assert not target.schedule_perturbation
    assert "schedule_perturbation" not in target.as_dict()
    assert CompilerConfig(**target.as_dict()) == target
    assert "vxla.perturb" not in generate(load_program(MODULE), target)[0]


def test_on_it_is_part_of_the_identity_and_splits_every_kernel() -> None:
    program = load_program(MODULE)
    target = config(DEFAULT)
    perturbed_config = target.with_schedule_perturbation()
    assert perturbed_config.as_dict()["schedule_perturbation"] is True
    assert CompilerConfig(**perturbed_config.as_dict()) == perturbed_config
    assert perturbed_config.digest() != target.digest()
    assert "vxla.perturb" in generate(program, perturbed_config)[0]
    pinned = compile_program(program, target, cache_dir=False)
    perturbed = compile_program(program, perturbed_config, cache_dir=False)
    assert pinned.hashes["binary_hash"] != perturbed.hashes["binary_hash"]
    assert pinned.hashes["graph_hash"] == perturbed.hashes["graph_hash"]  # the same graph and buffers
    kernels = [s for s in P.walk(perturbed.plan.steps) if isinstance(s, P.KernelStep)]
    assert kernels and all(s.grain == 1 for s in kernels)
    a = np.random.default_rng(1).standard_normal((96, 80)).astype(np.float32)
    expected = pinned.run(a, threads=1)[0].tobytes()
    for seed in range(1, 9):
        assert perturbed.run(a, threads=3, schedule_seed=seed)[0].tobytes() == expected


def test_a_schedule_seed_needs_a_perturbed_build() -> None:
    pinned = compile_program(load_program(MODULE), config(DEFAULT), cache_dir=False)
    with pytest.raises(ArgumentError, match="schedule_perturbation"):
        pinned.run(np.zeros((96, 80), np.float32), schedule_seed=3)
