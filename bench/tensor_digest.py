"""Tensor digests, vxla.tensor.v1 against vxla.tensor.v2, on the path a traced run takes.

A traced run digests every intermediate with `TensorDigester.of_memory` (one SHA-256 over
the header and the bytes in v1; in v2 a leaf hash per chunk, taken from the memory in place,
the tree's levels, then SHA-256 over the header and the root). This times that call, per
tensor, for v1 and for v2 with each candidate chunk size (attest/digests.py's CHUNK_BYTES is
the one chosen; the others are measured by setting it for the measurement only), on:

- the largest inputs and outputs of the fixtures (tests/fixtures);
- synthetic f32 tensors of 1 MiB, 16 MiB and 64 MiB (random, no NaN: hashed in place), and
  the 16 MiB one with a NaN (its canonical copy is made first, as in v1);

and then whole op-level runs (`Executable.run_traced`, one thread) of a few fixtures with
each version, beside the plain run: what tracing every intermediate costs end to end.

It also prints, per candidate, the size of one element proof of the 64 MiB tensor (the chunk
and its siblings), which is what a contract reads. Timing is bench/models.py's `measure`
(one warm-up call, --repeat samples of as many calls as last --min-sample-ms, garbage
collector off; the median per call). Nothing here is a test and nothing is asserted about
times; it does check that each digest it times is tensor_digest's.

    .venv/bin/python bench/tensor_digest.py [--repeat R] [--min-sample-ms MS] [--fixtures N] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as a script, only bench/ is on the path; import the project from the repository root.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import attest.digests as digests  # noqa: E402
from attest.commitment import path_moves  # noqa: E402
from attest.digests import TENSOR_DIGEST_V1, TENSOR_DIGEST_V2, TensorDigester, tensor_digest  # noqa: E402
from attest.tensor_proof import element_proof  # noqa: E402
from bench.models import Timing, measure, progress  # noqa: E402
from compiler.api import compile_program, load_config, load_program  # noqa: E402
from harness.fixture_data import FIXTURE_NAMES, Fixture  # noqa: E402

CANDIDATES = (1024, 4096)
TRACED = ("transformer_block", "remat_transformer_train_step", "cnn_maxpool_train_step")
MIB = 1 << 20


@contextlib.contextmanager
def chunk_bytes(size: int) -> Iterator[None]:
    """CHUNK_BYTES set to `size` while measuring a candidate (attest.digests reads it at each
    call); restored after."""
    chosen = digests.CHUNK_BYTES
    digests.CHUNK_BYTES = size
    try:
        yield
    finally:
        digests.CHUNK_BYTES = chosen


@dataclass
class Row:
    """One tensor's medians: v1, then v2 per candidate chunk size."""

    name: str
    nbytes: int
    v1: Timing
    v2: dict[int, Timing]

    def as_json(self) -> dict:
        data: dict = {
            "tensor": self.name,
            "bytes": self.nbytes,
            "v1_ms": self.v1.median_s * 1e3,
            "v1_mb_s": _mb_s(self.nbytes, self.v1),
        }
        for size, timing in self.v2.items():
            data[f"v2_{size}_ms"] = timing.median_s * 1e3
            data[f"v2_{size}_mb_s"] = _mb_s(self.nbytes, timing)
            data[f"v2_{size}_ratio"] = timing.median_s / self.v1.median_s
        return data


def _mb_s(nbytes: int, timing: Timing) -> float:
    return nbytes / 1e6 / timing.median_s


def _memory(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a runtime buffer holds them: C-contiguous uint8."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def bench_tensor(name: str, array: np.ndarray, repeat: int, min_sample_s: float) -> Row:
    memory = _memory(array)
    v1 = TensorDigester.of(array.dtype, array.shape, TENSOR_DIGEST_V1)
    v2 = TensorDigester.of(array.dtype, array.shape, TENSOR_DIGEST_V2)
    if v1.of_memory(memory) != tensor_digest(array, TENSOR_DIGEST_V1):
        raise AssertionError(f"{name}: the v1 digest of the memory is not tensor_digest's")
    timings = {}
    for size in CANDIDATES:
        with chunk_bytes(size):
            if v2.of_memory(memory) != tensor_digest(array, TENSOR_DIGEST_V2):
                raise AssertionError(f"{name}: the v2 digest of the memory is not tensor_digest's")
            timings[size] = measure(lambda: v2.of_memory(memory), repeat, min_sample_s)
    return Row(
        name, memory.nbytes, measure(lambda: v1.of_memory(memory), repeat, min_sample_s), timings
    )


def fixture_tensors(count: int) -> list[tuple[str, np.ndarray]]:
    """The `count` largest inputs and outputs of the fixtures, largest first."""
    found: list[tuple[str, np.ndarray]] = []
    for name in FIXTURE_NAMES:
        fixture = Fixture(name)
        found += [(f"{name}/in{i}", a) for i, a in enumerate(fixture.inputs())]
        found += [(f"{name}/out{i}", a) for i, a in enumerate(fixture.xla_outputs())]
    found.sort(key=lambda item: -item[1].nbytes)
    return found[:count]


def synthetic_tensors() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    tensors = [
        (f"f32 {size} MiB", rng.standard_normal(size * MIB // 4, dtype=np.float32))
        for size in (1, 16, 64)
    ]
    with_nan = tensors[1][1].copy()
    with_nan[12345] = np.nan
    tensors.append(("f32 16 MiB, a NaN", with_nan))
    return tensors


def proof_bytes(array: np.ndarray) -> dict[int, int]:
    """Per candidate: the bytes of the proof of the array's first element (its chunk, 32 per
    sibling and the header; the indices, offset and width are a few words more). The chosen
    size's is element_proof's own; the others' are counted from the tree's shape."""
    proof = element_proof(array, 0)
    header = len(proof.header)
    sizes = {}
    for size in CANDIDATES:
        count = -(-array.nbytes // size)
        sizes[size] = min(size, array.nbytes) + 32 * path_moves(0, count) + header
    chosen = len(proof.chunk) + 32 * len(proof.siblings) + header
    if sizes[digests.CHUNK_BYTES] != chosen:
        raise AssertionError(f"a proof of {chosen} bytes, counted {sizes[digests.CHUNK_BYTES]}")
    return sizes


@dataclass
class TracedRow:
    """One fixture's op-level runs: plain, then run_traced with v1 and with v2."""

    name: str
    instructions: int
    plain: Timing
    v1: Timing
    v2: Timing

    def as_json(self) -> dict:
        return {
            "fixture": self.name,
            "instructions": self.instructions,
            "plain_ms": self.plain.median_s * 1e3,
            "traced_v1_ms": self.v1.median_s * 1e3,
            "traced_v2_ms": self.v2.median_s * 1e3,
            "ratio": self.v2.median_s / self.v1.median_s,
        }


def bench_traced(name: str, repeat: int, min_sample_s: float) -> TracedRow:
    fixture = Fixture(name)
    executable = compile_program(load_program(fixture.module_text), load_config(), threads=1)
    inputs = fixture.inputs()

    def traced(version: str) -> Timing:
        return measure(
            lambda: executable.run_traced(*inputs, digest_version=version), repeat, min_sample_s
        )

    count = len(executable.run_traced(*inputs).instructions)
    plain = measure(lambda: executable.run(*inputs), repeat, min_sample_s)
    return TracedRow(name, count, plain, traced(TENSOR_DIGEST_V1), traced(TENSOR_DIGEST_V2))


def traced_table(rows: Sequence[TracedRow]) -> str:
    lines = [
        f"{'op-level run':<46} {'instrs':>7} {'plain ms':>9} {'v1 ms':>9} {'v2 ms':>11} {'x v1':>7}"
    ]
    for row in rows:
        lines.append(
            f"{row.name:<46} {row.instructions:>7} {row.plain.median_s * 1e3:>9.3f} {row.v1.median_s * 1e3:>9.3f}"
            f" {row.v2.median_s * 1e3:>11.3f} {row.v2.median_s / row.v1.median_s:>7.2f}"
        )
    return "\n".join(lines)


def _describe(array: np.ndarray) -> str:
    return f"{array.dtype.name}{list(array.shape)}"


def table(rows: Sequence[Row], shapes: dict[str, str], proofs: dict[int, int], header: str) -> str:
    columns = "".join(f" {f'v2/{s} ms':>11} {'MB/s':>7} {'x v1':>5}" for s in CANDIDATES)
    lines = [header, f"{'tensor':<46} {'MiB':>7} {'v1 ms':>9} {'MB/s':>7}{columns}"]
    for row in rows:
        line = f"{row.name + ' ' + shapes.get(row.name, ''):<46} {row.nbytes / MIB:>7.2f} {row.v1.median_s * 1e3:>9.3f} {_mb_s(row.nbytes, row.v1):>7.0f}"
        for size in CANDIDATES:
            timing = row.v2[size]
            line += f" {timing.median_s * 1e3:>11.3f} {_mb_s(row.nbytes, timing):>7.0f} {timing.median_s / row.v1.median_s:>5.2f}"
        lines.append(line)
    lines.append(
        f"v2/N = vxla.tensor.v2 with N-byte chunks (chosen: {digests.CHUNK_BYTES}); x v1 = v2 time / v1 time. "
        "Element proof of the 64 MiB tensor: "
        + ", ".join(f"{s}-byte chunks {b} bytes" for s, b in proofs.items())
        + "."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="samples per measurement (default 7)")
    parser.add_argument(
        "--min-sample-ms", type=float, default=50.0, help="shortest sample (default 50 ms)"
    )
    parser.add_argument(
        "--fixtures",
        type=int,
        default=6,
        help="how many of the largest fixture tensors (default 6)",
    )
    parser.add_argument(
        "--traced",
        nargs="*",
        default=list(TRACED),
        help=f"fixtures run op-level (default {' '.join(TRACED)})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    tensors = fixture_tensors(args.fixtures) + synthetic_tensors()
    rows = []
    for name, array in tensors:
        progress(f"{name}: {_describe(array)}")
        rows.append(bench_tensor(name, array, args.repeat, args.min_sample_ms / 1e3))
    proofs = proof_bytes(dict(tensors)["f32 64 MiB"])
    traced = []
    for name in args.traced:
        progress(f"{name}: op-level runs")
        traced.append(bench_traced(name, args.repeat, args.min_sample_ms / 1e3))
    header = f"tensor digests: {platform.processor() or platform.machine()}, numpy {np.__version__}, median of {args.repeat}"
    if args.json:
        print(
            json.dumps(
                {
                    "header": header,
                    "chunk_bytes": digests.CHUNK_BYTES,
                    "proof_bytes": proofs,
                    "results": [r.as_json() for r in rows],
                    "traced": [r.as_json() for r in traced],
                },
                indent=2,
            )
        )
    else:
        print(table(rows, {name: _describe(array) for name, array in tensors}, proofs, header))
        print(traced_table(traced))
    return 0


if __name__ == "__main__":
    sys.exit(main())
