"""The passes' decisions for the backend, recorded on each instruction they concern
(Instruction.decisions) once the pipeline's last rewrite is done:

- every fusion: the kind of the one kernel it is emitted as, or inlined op by op
  (fusibility.fused_kernel). Fusions come from the fusion passes and from the input text
  alike (XLA's optimized HLO holds kLoop, kInput and kOutput fusions of any contents), so
  each is judged by what it holds, not by who made it;
- every reduce-window: the dimension along which it is a running reduction, computed as a
  scan (running_dimension), or the general window loop.

compiler/codegen/ emits what is recorded and decides none of it; an instruction without
decisions (a module lowered without the pipeline) is emitted the general way. Nothing here
rewrites the module: its canonical text, graph_hash and the pipeline_id stay as they are.
"""

from __future__ import annotations

import numpy as np

from attest.digests import canonical_tensor_bytes
from compiler.hlo import attributes as attr
from compiler.hlo.ir import Computation, Decisions, Instruction, Module
from compiler.passes.fusibility import fused_kernel
from compiler.reference import HANDLERS
from compiler.reference.evaluator import Evaluator


def running_window(window: attr.Window, dims: tuple[int, ...]) -> int | None:
    """The dimension d along which a window covers the whole of d, padded below by its size
    - 1, with stride 1 and size 1 elsewhere (JAX's cumsum, cumprod, cummax); None for any
    other window."""
    found = None
    for d, (w, n) in enumerate(zip(window.dims, dims, strict=True)):
        if w.stride != 1 or w.window_dilation != 1 or w.base_dilation != 1:
            return None
        if w.size == 1 and w.pad_low == 0 and w.pad_high == 0:
            continue
        if found is not None or n < 2 or (w.size, w.pad_low, w.pad_high) != (n, n - 1, 0):
            return None
        found = d
    return found


def running_dimension(instruction: Instruction) -> int | None:
    """The dimension d along which a reduce-window is a running reduction (running_window),
    where the padding folds to init itself (reducer(init, init) is init, bit for bit, for
    constant inits, by the reference's own bits); None otherwise.

    Output element i along d is then reducer(...reducer(init, x[0])..., x[i]): the padding
    positions come first and leave init as it is. That is the previous element's value
    reduced with x[i], so a scan along d computes the contract's bits in O(n), where the
    window loop takes O(n^2)."""
    window = instruction.attrs["window"]
    computation = instruction.attrs["to_apply"]
    assert isinstance(window, attr.Window) and isinstance(computation, Computation)
    half = len(instruction.operands) // 2
    found = running_window(window, instruction.operands[0].array_shape.dims)
    inits = instruction.operands[half:]
    if found is None or any(op.opcode != "constant" or op.literal is None for op in inits):
        return None
    literals = [np.asarray(op.literal) for op in inits]
    folded = Evaluator(HANDLERS).apply_scalar_computation(computation, literals + literals)
    same = all(canonical_tensor_bytes(np.asarray(f).astype(v.dtype)) == canonical_tensor_bytes(v)
               for f, v in zip(folded, literals, strict=True))  # fmt: skip
    return found if same else None


def decide(module: Module) -> None:
    """Records the backend's decisions on every fusion and reduce-window of `module`
    (replacing earlier ones: the module may have changed since)."""
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "fusion":
                instruction.decisions = Decisions(fused_kernel=fused_kernel(instruction))
            elif instruction.opcode == "reduce-window":
                instruction.decisions = Decisions(running_dimension=running_dimension(instruction))
