"""Identical kernels are generated once (compiler/codegen/kernel.py): kernels read their
buffers through per-step slots, so the kernels of two identical layers are the same text,
the second is dropped and both steps call the first, with the same bits as the reference."""

from __future__ import annotations

import numpy as np

from compiler.codegen import plan as P
from compiler.config import load_config
from compiler.driver import generate
from compiler.program import load_program
from harness.targets import run_everywhere

# Two layers of the same shapes (tanh(x . w + b)) with their own weights, then a third of
# another width: layers one and two share their kernels, layer three has its own.
LAYERS = """HloModule layers
ENTRY e {
  x = f32[8,64] parameter(0)
  w1 = f32[64,64] parameter(1)
  b1 = f32[64] parameter(2)
  w2 = f32[64,64] parameter(3)
  b2 = f32[64] parameter(4)
  w3 = f32[64,24] parameter(5)
  d1 = f32[8,64] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb1 = f32[8,64] broadcast(b1), dimensions={1}
  a1 = f32[8,64] add(d1, bb1)
  h1 = f32[8,64] tanh(a1)
  d2 = f32[8,64] dot(h1, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb2 = f32[8,64] broadcast(b2), dimensions={1}
  a2 = f32[8,64] add(d2, bb2)
  h2 = f32[8,64] tanh(a2)
  d3 = f32[8,24] dot(h2, w3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT h3 = f32[8,24] tanh(d3)
}
"""


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    shapes = [(8, 64), (64, 64), (64,), (64, 64), (64,), (64, 24)]
    return [rng.standard_normal(shape).astype(np.float32) * 0.3 for shape in shapes]


def _kernel_steps(plan: P.Plan) -> list[P.KernelStep]:
    return [step for step in P.walk(plan.steps) if isinstance(step, P.KernelStep)]


def _defined_kernels(ir_text: str) -> list[str]:
    return [line.split("@", 1)[1].split("(", 1)[0].strip('"') for line in ir_text.splitlines() if line.startswith("define internal void @") and "k_" in line]


def test_identical_layers_share_their_kernels() -> None:
    ir_text, plan, _ = generate(load_program(LAYERS), load_config())
    steps = _kernel_steps(plan)
    defined = _defined_kernels(ir_text)
    called = sorted({step.kernel for step in steps})
    assert called == sorted(defined), "every kernel a step calls is defined, and only those"
    assert len(defined) < len(steps), f"{len(steps)} kernel steps, {len(defined)} kernels: nothing shared"
    # In plan order: layer one's and layer two's dot (bias and tanh fused into it), then
    # layer three's steps.
    first, second, *third = steps
    assert first.kernel == second.kernel
    assert first.buffers != second.buffers, "shared kernels read each step's own buffers"
    assert first.kernel not in {step.kernel for step in third}, "a layer of another shape has its own kernel"


def test_shared_kernels_give_the_reference_bits_on_every_thread_count() -> None:
    run_everywhere(LAYERS, _arrays())


def test_slots_follow_the_kernels_first_use() -> None:
    """A step's buffers are its slots: each listed once, in the order the kernel asked."""
    _, plan, _ = generate(load_program(LAYERS), load_config())
    for step in _kernel_steps(plan):
        assert len(set(step.buffers)) == len(step.buffers), step
        assert all(0 <= b < len(plan.buffers) for b in step.buffers), step
