"""The cost of signed execution traces relative to plain execution, in one process.

For each model (the fixtures mlp_softmax, cnn and transformer_block, bench/models.py's
4M-element f32 elementwise chain, and a larger MLP, 256x1024 @ 1024x4096, relu,
@ 4096x1024, defined here) it times, per call:

- plain:        `Executable.run(*inputs)`;
- outputs-only: `run`, then `node.tracing.statement.build_statement` (input and output tensor digests,
                the statement, its canonical JSON and validation) and `sign_statement`
                (DSSE PAE + Ed25519): what `vxla run --trace --key` adds to a run;
- outputs-only, inputs known: the same with the input records passed in (a node that
                stores inputs by digest has them already), so only outputs are hashed;
- op-level:     `Executable.run_traced` (a digest of every traced instruction's output as
                soon as it is computed), then the same statement (with the per-instruction
                records and their Merkle root) and signature: `--op-level`.

and the parts of the outputs-only cost on their own (input digests, output digests,
statement building without the digests is the remainder, signing). Overheads are
(mode - plain) / plain of the medians, in percent. Compilation is done once and never
timed. Timing is bench/models.py's `measure`: one warm-up call, then --repeat samples of as
many calls as last --min-sample-ms, garbage collector off; the median per call is reported.

    .venv/bin/python bench/tracing.py [--threads N] [--repeat R] [--models NAME ...] [--json]

It asserts nothing about times (tests never time anything); it does check, before timing,
that the traced run's outputs are the plain run's bits, so every mode computes the same.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as a script, only bench/ is on the path; import the project from the repository root.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from attest import key_id, sign_statement, tensor_digest  # noqa: E402
from attest.keys import generate_private_key  # noqa: E402
from bench.models import MODEL_NAMES, Model, Timing, compile_model, load_model, measure, progress  # noqa: E402
from compiler.api import load_config, load_program  # noqa: E402
from node.tracing.statement import build_statement, checked_inputs, tensor_records  # noqa: E402

# Compute-bound: 4.3 GFLOP of dots on 33 MB of inputs and 1 MB of output, so the cost of
# hashing the output is small next to the run, unlike the memory-bound elementwise chain.
BIG_MLP = """HloModule big_mlp
ENTRY e {
  x = f32[256,1024]{1,0} parameter(0)
  w1 = f32[1024,4096]{1,0} parameter(1)
  w2 = f32[4096,1024]{1,0} parameter(2)
  h = f32[256,4096]{1,0} dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[256,4096]{1,0} broadcast(z), dimensions={}
  r = f32[256,4096]{1,0} maximum(h, zb)
  ROOT y = f32[256,1024]{1,0} dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
BENCH_MODELS = (*MODEL_NAMES, "big_mlp")


def bench_load_model(name: str) -> Model:
    """bench/models.py's model, or the big MLP defined here (no numpy equivalent needed:
    this bench compares vxla with itself)."""
    if name != "big_mlp":
        return load_model(name)
    rng = np.random.default_rng(0)
    arrays = tuple(
        (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0])).astype(np.float32)
        for shape in ((256, 1024), (1024, 4096), (4096, 1024))
    )
    return Model(name, "MLP 256x1024 @ 1024x4096, relu, @ 4096x1024 (f32)", BIG_MLP, arrays, lambda *a: (), None)


@dataclass
class TraceCost:
    """One model's per-call medians (seconds) for each mode and for the parts."""

    model: str
    description: str
    instructions: int
    input_bytes: int
    output_bytes: int
    plain: Timing
    outputs_only: Timing
    outputs_only_known_inputs: Timing
    op_level: Timing
    run_traced: Timing
    input_digests: Timing
    output_digests: Timing
    signing: Timing

    def overhead(self, timing: Timing) -> float:
        """Percent over the plain run, of the medians."""
        return 100.0 * (timing.median_s - self.plain.median_s) / self.plain.median_s

    def as_json(self) -> dict:
        timings = ("plain", "outputs_only", "outputs_only_known_inputs", "op_level", "run_traced", "input_digests", "output_digests", "signing")
        data: dict = {
            "model": self.model,
            "description": self.description,
            "instructions": self.instructions,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
        }
        for name in timings:
            timing = getattr(self, name)
            data[f"{name}_ms"] = timing.median_s * 1e3
        data["outputs_only_overhead_pct"] = self.overhead(self.outputs_only)
        data["outputs_only_known_inputs_overhead_pct"] = self.overhead(self.outputs_only_known_inputs)
        data["op_level_overhead_pct"] = self.overhead(self.op_level)
        data["run_traced_overhead_pct"] = self.overhead(self.run_traced)
        return data


def bench_model(name: str, threads: int, repeat: int, min_sample_s: float) -> TraceCost:
    """Compiles `name` once and times the three modes and the parts."""
    model = bench_load_model(name)
    config = load_config()
    executable, _ = compile_model(model, config, threads)
    program = load_program(model.module_text)
    inputs = list(model.inputs)
    key = generate_private_key()
    signer = key_id(key)

    plain_outputs = executable.run(*inputs)
    traced = executable.run_traced(*inputs)
    for a, b in zip(plain_outputs, traced.outputs, strict=True):
        if a.tobytes() != b.tobytes():
            raise AssertionError(f"{name}: the traced run's outputs differ from the plain run's")

    known = tensor_records(checked_inputs(program, inputs), "in")

    def statement_of(run: object, op_level: bool, input_records: object = None) -> object:
        return build_statement(
            program, executable, inputs, run,  # type: ignore[arg-type]
            job_id="bench", chain_id=None, contract=None, key_id=signer,
            threads=threads, timings_ns={}, op_level=op_level, input_records=input_records,  # type: ignore[arg-type]
        )  # fmt: skip

    def plain() -> object:
        return executable.run(*inputs)

    def outputs_only() -> object:
        outputs = executable.run(*inputs)
        return sign_statement(statement_of(outputs, False), key)  # type: ignore[arg-type]

    def outputs_only_known_inputs() -> object:
        outputs = executable.run(*inputs)
        return sign_statement(statement_of(outputs, False, known), key)  # type: ignore[arg-type]

    def op_level() -> object:
        run = executable.run_traced(*inputs)
        return sign_statement(statement_of(run, True), key)  # type: ignore[arg-type]

    statement = statement_of(traced, True)
    progress(f"{name}: timing")
    return TraceCost(
        model=name,
        description=model.description,
        instructions=len(traced.instructions),
        input_bytes=sum(a.nbytes for a in inputs),
        output_bytes=sum(a.nbytes for a in plain_outputs),
        plain=measure(plain, repeat, min_sample_s),
        outputs_only=measure(outputs_only, repeat, min_sample_s),
        outputs_only_known_inputs=measure(outputs_only_known_inputs, repeat, min_sample_s),
        op_level=measure(op_level, repeat, min_sample_s),
        run_traced=measure(lambda: executable.run_traced(*inputs), repeat, min_sample_s),
        input_digests=measure(lambda: [tensor_digest(a) for a in inputs], repeat, min_sample_s),
        output_digests=measure(lambda: [tensor_digest(a) for a in plain_outputs], repeat, min_sample_s),
        signing=measure(lambda: sign_statement(statement, key), repeat, min_sample_s),  # type: ignore[arg-type]
    )


def _ms(timing: Timing) -> str:
    return f"{timing.median_s * 1e3:9.3f}"


def table(results: Sequence[TraceCost], header: str) -> str:
    """The results as a text table: medians in ms, overheads in percent over plain."""
    lines = [
        header,
        f"{'model':<18} {'instrs':>6} {'plain ms':>9} {'outs ms':>9} {'outs %':>7} {'outs* %':>7} {'op ms':>9} {'op %':>7}"
        f" {'traced %':>8} | {'in dig':>9} {'out dig':>9} {'sign':>9}",
    ]
    for r in results:
        lines.append(
            f"{r.model:<18} {r.instructions:>6} {_ms(r.plain)} {_ms(r.outputs_only)} {r.overhead(r.outputs_only):>6.1f}%"
            f" {r.overhead(r.outputs_only_known_inputs):>6.1f}%"
            f" {_ms(r.op_level)} {r.overhead(r.op_level):>6.1f}% {r.overhead(r.run_traced):>7.1f}% |"
            f" {_ms(r.input_digests)} {_ms(r.output_digests)} {_ms(r.signing)}"
        )
    lines.append(
        "outs = run + statement (input and output digests) + Ed25519/DSSE signature; outs* = the same with "
        "the input digests known; op = run_traced + statement with per-instruction records + signature; "
        "traced = run_traced alone; in dig/out dig/sign = those parts alone (ms)."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="vxla worker threads (default 1)")
    parser.add_argument("--repeat", type=int, default=7, help="samples per mode (default 7)")
    parser.add_argument("--min-sample-ms", type=float, default=50.0, help="shortest sample (default 50 ms)")
    parser.add_argument("--models", nargs="+", choices=BENCH_MODELS, default=list(BENCH_MODELS), help="models to run (default: all)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    results = [bench_model(name, args.threads, args.repeat, args.min_sample_ms / 1e3) for name in args.models]
    header = f"tracing overhead: {platform.processor() or platform.machine()}, threads={args.threads}, numpy {np.__version__}, median of {args.repeat}"
    if args.json:
        print(json.dumps({"header": header, "results": [r.as_json() for r in results]}, indent=2))
    else:
        print(table(results, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
