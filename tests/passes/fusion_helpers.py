"""Shared checks of the fusion pass tests: run loop fusion and one more fusion pass, require
the printed text to be a fixed point and the reference evaluator's bits to be unchanged."""

from __future__ import annotations

import numpy as np

from compiler.hlo import load_module
from compiler.hlo.ir import Computation, Module
from compiler.hlo.printer import canonical_text
from compiler.hlo.verifier import verify_module
from compiler.passes.base import Pass
from compiler.passes.loop_fusion import LoopFusion
from compiler.reference import evaluate

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3.5, 2.0, 7.25, -1e30, 3.0, 0.5], dtype=np.float32)


def fused_with(text: str, second: Pass) -> Module:
    """The module after loop fusion and then `second`, verified."""
    module = load_module(text)
    LoopFusion().run(module)
    second.run(module)
    verify_module(module)
    return module


def check_with(text: str, second: Pass, *arrays: np.ndarray) -> Module:
    """fused_with, asserting a printing fixed point and bit-identical reference outputs."""
    before = evaluate(load_module(text), list(arrays))
    module = fused_with(text, second)
    printed = canonical_text(module)
    assert canonical_text(load_module(printed)) == printed
    after = evaluate(load_module(printed), list(arrays))
    for got, want in zip(after, before, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    return module


def kinds(computation: Computation) -> list[tuple[str, list[str]]]:
    """Each fusion's kind and the opcodes of its computation (parameters left out)."""
    out = []
    for instruction in computation.execution_order():
        if instruction.opcode == "fusion":
            callee = instruction.attrs["calls"]
            assert isinstance(callee, Computation)
            out.append((str(instruction.attrs["kind"]), [i.opcode for i in callee.execution_order() if i.opcode != "parameter"]))
    return out
