#!/usr/bin/env python3
"""Export XLA:CPU's results for the ops JAX never emits, as test vectors:
tests/fixtures/<family>_xla.json (the modules) and tests/fixtures/<family>_xla.npz (their
inputs and XLA:CPU's outputs), for the families batch_norm (training, inference and grad
over element types, shapes, feature indices and epsilons), linalg (cholesky and every
form of triangular-solve, on well-conditioned matrices) and bits (reduce-precision, popcnt,
count-leading-zeros).

Development tool only (JAX/jaxlib from tools/requirements-fixtures.txt, as
tools/export_fixtures.py): XLA:CPU runs the HLO text of each module on random inputs.
tests/reference/test_batch_norm.py and test_linalg.py check the reference against the
outputs and the LLVM backend against the reference. Deterministic: fixed seeds, fixed zip
timestamps.

    .venv-tools/bin/python tools/export_op_cases.py [batch_norm] [linalg] [bits]
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterator
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


def _batch_norm_module(opcode: str, dtype: str, dims: tuple[int, ...], feature: int, epsilon: float) -> str:
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


def _batch_norm_inputs(opcode: str, dtype: str, dims: tuple[int, ...], feature: int, rng: np.random.Generator) -> list[np.ndarray]:
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


Case = tuple[str, list[np.ndarray]]


def batch_norm_cases(rng: np.random.Generator) -> Iterator[Case]:
    for opcode in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad"):
        for dtype, dims, feature, epsilon in SHAPES:
            yield _batch_norm_module(opcode, dtype, dims, feature, epsilon), _batch_norm_inputs(opcode, dtype, dims, feature, rng)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def linalg_cases(rng: np.random.Generator) -> Iterator[Case]:
    for dtype, batch, n in (("f32", (), 6), ("f64", (3,), 5), ("f32", (2, 2), 9)):
        numpy_type = NUMPY[dtype]
        shape = f"{dtype}[{','.join(map(str, (*batch, n, n)))}]"
        x = rng.standard_normal((*batch, n, n))
        spd = (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(numpy_type)
        for lower in (True, False):
            yield f"HloModule c\nENTRY e {{\n  a = {shape} parameter(0)\n  ROOT c = {shape} cholesky(a), lower={_bool(lower)}\n}}\n", [spd]
        triangle = (np.tril(rng.standard_normal((*batch, n, n))) + 2 * np.eye(n)).astype(numpy_type)
        for left, lower, transpose, unit in itertools.product((True, False), (True, False), ("NO_TRANSPOSE", "TRANSPOSE"), (False, True)):
            a = triangle if lower else np.swapaxes(triangle, -1, -2).copy()
            b_dims = (*batch, n, 3) if left else (*batch, 3, n)
            b_shape = f"{dtype}[{','.join(map(str, b_dims))}]"
            attrs = f"left_side={_bool(left)}, lower={_bool(lower)}, unit_diagonal={_bool(unit)}, transpose_a={transpose}"
            text = f"HloModule t\nENTRY e {{\n  a = {shape} parameter(0)\n  b = {b_shape} parameter(1)\n  ROOT x = {b_shape} triangular-solve(a, b), {attrs}\n}}\n"
            yield text, [a, rng.standard_normal(b_dims).astype(numpy_type)]


# reduce-precision's (exponent bits, mantissa bits): the narrow float formats and odd ones.
PRECISIONS = ((5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (3, 0), (2, 1))
BITS_TYPES = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}
INTEGER_TYPES = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "u16": np.uint16, "s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64}


def bits_cases(rng: np.random.Generator) -> Iterator[Case]:
    """reduce-precision on random bit patterns (NaNs, infinities and subnormals among them),
    and popcnt and count-leading-zeros on random integers and their extremes."""
    for dtype, unsigned in BITS_TYPES.items():
        width = np.dtype(unsigned).itemsize * 8
        x = rng.integers(0, 2**width, size=1024, dtype=np.uint64).astype(unsigned).view(NUMPY[dtype])
        for exponent_bits, mantissa_bits in PRECISIONS:
            if exponent_bits == 8 and mantissa_bits == 23 and width < 32:
                continue
            text = f"HloModule p\nENTRY e {{\n  a = {dtype}[1024] parameter(0)\n  ROOT r = {dtype}[1024] reduce-precision(a), exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}\n}}\n"
            yield text, [x]
    for dtype, numpy_type in INTEGER_TYPES.items():
        info = np.iinfo(numpy_type)
        x = rng.integers(info.min, info.max, size=256, dtype=numpy_type, endpoint=True)
        x[:4] = [0, 1, info.min, info.max]
        for opcode in ("popcnt", "count-leading-zeros"):
            yield f"HloModule b\nENTRY e {{\n  a = {dtype}[256] parameter(0)\n  ROOT r = {dtype}[256] {opcode}(a)\n}}\n", [x]


FAMILIES: dict[str, Callable[[np.random.Generator], Iterator[Case]]] = {"batch_norm": batch_norm_cases, "linalg": linalg_cases, "bits": bits_cases}


def export(family: str) -> None:
    rng = np.random.default_rng(20261202)
    cases, arrays = [], {}
    for text, inputs in FAMILIES[family](rng):
        outputs = run_on_xla_cpu(text, inputs)
        number = len(cases)
        cases.append({"module": text, "inputs": len(inputs), "outputs": len(outputs)})
        arrays.update({f"case{number}_in{i}": a for i, a in enumerate(inputs)})
        arrays.update({f"case{number}_out{i}": a for i, a in enumerate(outputs)})
    (FIXTURES / f"{family}_xla.json").write_text(json.dumps({"jax": __import__("jax").__version__, "cases": cases}, indent=1) + "\n")
    write_npz(FIXTURES / f"{family}_xla.npz", arrays)
    print(f"{family}: {len(cases)} cases in tests/fixtures/{family}_xla.json and .npz")


def main(argv: list[str]) -> None:
    for family in argv or list(FAMILIES):
        if family not in FAMILIES:
            sys.exit(f"export_op_cases.py: no family {family!r}; known: {', '.join(FAMILIES)}")
        export(family)


if __name__ == "__main__":
    main(sys.argv[1:])
