"""Kernels deduplicated before they are generated (compiler/codegen/reuse.py): lowering with
repeated emissions replayed makes the very IR and plan that emitting every instruction makes,
and replays something wherever a model repeats itself."""

from __future__ import annotations

import pytest

from compiler.codegen import buffer_assignment, reuse
from compiler.codegen import plan as P
from compiler.codegen.backends import backend_for
from compiler.codegen.lower import lower_module
from compiler.config import load_config
from compiler.driver import EMITTERS, optimize
from compiler.program import load_program
from harness.fixture_data import Fixture

# The fixtures whose models repeat instructions (layers, a forward and a backward pass), and
# the ones with loops and branches, whose bodies are never replayed. (Every fixture was
# checked when reuse.py was written; a sample keeps make test's time.)
REPEATING = ("transformer_block", "remat_transformer_train_step", "dropout_train_step", "cnn_maxpool_train_step")
OTHERS = ("mlp_train_step",)
CONTROL_FLOW = ("scan", "fori_loop", "conditional", "topk_sampling")


def _generated(name: str, replay_repeats: bool) -> tuple[str, bytes]:
    config = load_config()
    module = optimize(load_program(Fixture(name).module_text), config)
    lowering, plan = lower_module(module, config, EMITTERS, replay_repeats=replay_repeats)
    plan = buffer_assignment.apply(plan, buffer_assignment.assign(plan, lowering.in_place))
    backend_for(config).emit_entry(lowering.kernels, plan)
    return lowering.kernels.ir_text(), plan.canonical_bytes()


@pytest.mark.parametrize("name", REPEATING + CONTROL_FLOW + OTHERS)
def test_replayed_emissions_make_the_same_ir_and_plan(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    replays = []
    replay = reuse.Emission.replay
    monkeypatch.setattr(reuse.Emission, "replay", lambda self, *args: replays.append(args[1].opcode) or replay(self, *args))
    emitted = _generated(name, replay_repeats=False)
    assert not replays
    assert _generated(name, replay_repeats=True) == emitted
    if name in REPEATING:
        assert replays, f"{name} repeats instructions, and none was replayed"



@pytest.mark.parametrize("name", ("transformer_block", "remat_transformer_train_step"))
def test_a_repeated_output_fusion_is_replayed_with_its_inner_labels(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dot with its epilogue (a kOutput fusion) labels its steps with the dot inside it: the
    replay labels them with the new fusion's own dot, and makes what emitting it again makes."""
    replayed: list[tuple[str, list[str], list[str]]] = []
    replay = reuse.Emission.replay

    def recording(self: reuse.Emission, lowering, instruction, operands, steps):  # noqa: ANN001, ANN202
        start = len(steps)
        result = replay(self, lowering, instruction, operands, steps)
        if any(self.labels):
            labels = [s.instruction for s in steps[start:] if isinstance(s, P.KernelStep)]
            replayed.append((instruction.name, labels, reuse.labelled_names(instruction)[1:]))
        return result

    monkeypatch.setattr(reuse.Emission, "replay", recording)
    replaying = _generated(name, replay_repeats=True)
    assert replayed, f"{name}: no output fusion was replayed"
    for fusion, labels, inside in replayed:
        assert labels and set(labels) <= set(inside), f"%{fusion}: steps labelled {labels}, not by instructions inside it"
    assert replaying == _generated(name, replay_repeats=False)
