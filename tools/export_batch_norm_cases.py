#!/usr/bin/env python3
"""Export XLA:CPU's batch-norm results as test vectors: tests/fixtures/batch_norm_xla.json
(the modules) and tests/fixtures/batch_norm_xla.npz (their inputs and XLA:CPU's outputs).

Development tool only (JAX/jaxlib from tools/requirements-fixtures.txt, as
tools/export_fixtures.py). Each case is one module with one batch-norm op (training,
inference or grad; element type, shape, feature index, epsilon) on random inputs; JAX never
emits these ops, so XLA:CPU runs the HLO text directly. tests/reference/test_batch_norm.py
checks the reference against the outputs and the LLVM backend against the reference.
Deterministic: fixed seeds, fixed zip timestamps.

    .venv-tools/bin/python tools/export_batch_norm_cases.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ml_dtypes  # noqa: E402
from export_fixtures import write_npz  # noqa: E402 - the tool's own reproducible .npz writer
from export_rng_cases import run_on_xla_cpu  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
NUMPY = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
# (element type, operand dims, feature index, epsilon)
SHAPES = [
    ("f32", (4, 5, 6, 3), 3, 0.001),
    ("f32", (3, 8, 2), 0, 1e-5),
    ("f32", (7,), 0, 0.1),
    ("f64", (6, 4), 1, 1e-3),
    ("bf16", (2, 4, 4, 8), 3, 0.001),
    ("f16", (5, 6), 1, 0.01),
]


def _module(opcode: str, dtype: str, dims: tuple[int, ...], feature: int, epsilon: float) -> str:
    array = f"{dtype}[{','.join(map(str, dims))}]"
    per_feature = f"{dtype}[{dims[feature]}]"
    attrs = f"epsilon={epsilon}, feature_index={feature}"
    if opcode == "batch-norm-training":
        params = [array, per_feature, per_feature]
        result = f"({array}, {per_feature}, {per_feature})"
    elif opcode == "batch-norm-inference":
        params = [array] + [per_feature] * 4
        result = array
    else:
        params = [array, per_feature, per_feature, per_feature, array]
        result = f"({array}, {per_feature}, {per_feature})"
    lines = [f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(params)]
    operands = ", ".join(f"p{i}" for i in range(len(params)))
    lines.append(f"  ROOT r = {result} {opcode}({operands}), {attrs}")
    return "HloModule bn\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def _inputs(opcode: str, dtype: str, dims: tuple[int, ...], feature: int, rng: np.random.Generator) -> list[np.ndarray]:
    numpy_type = NUMPY[dtype]
    features = dims[feature]
    x = (rng.standard_normal(dims) * 2 + 0.5).astype(numpy_type)
    scale = rng.standard_normal(features).astype(numpy_type)
    offset = rng.standard_normal(features).astype(numpy_type)
    mean = rng.standard_normal(features).astype(numpy_type)
    variance = (rng.random(features) + 0.1).astype(numpy_type)
    if opcode == "batch-norm-training":
        return [x, scale, offset]
    if opcode == "batch-norm-inference":
        return [x, scale, offset, mean, variance]
    return [x, scale, mean, variance, rng.standard_normal(dims).astype(numpy_type)]


def main() -> None:
    rng = np.random.default_rng(20261202)
    cases, arrays = [], {}
    for opcode in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad"):
        for dtype, dims, feature, epsilon in SHAPES:
            text = _module(opcode, dtype, dims, feature, epsilon)
            inputs = _inputs(opcode, dtype, dims, feature, rng)
            outputs = run_on_xla_cpu(text, inputs)
            number = len(cases)
            cases.append({"module": text, "inputs": len(inputs), "outputs": len(outputs)})
            arrays.update({f"case{number}_in{i}": a for i, a in enumerate(inputs)})
            arrays.update({f"case{number}_out{i}": a for i, a in enumerate(outputs)})
    (FIXTURES / "batch_norm_xla.json").write_text(json.dumps({"jax": __import__("jax").__version__, "cases": cases}, indent=1) + "\n")
    write_npz(FIXTURES / "batch_norm_xla.npz", arrays)
    print(f"wrote {len(cases)} cases to {FIXTURES / 'batch_norm_xla.json'} and .npz")


if __name__ == "__main__":
    main()
