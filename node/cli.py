"""The `vxla` command line.

Exit status: 0 success; 1 verification failed or outputs differ; 2 bad input or usage, with a
message on stderr that names the problem (for HLO: line and column).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attest.digests import tensor_digest
from compiler.hlo import HloError
from compiler.hlo.dtypes import from_numpy
from compiler.program import Program, load_program
from compiler.reference import EvaluationError, evaluate
from node.tensors import TensorFileError, load_npy, save_npz_atomic

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input from the user: reported on stderr, exit status 2."""


def _read_program(path: str) -> Program:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return load_program(data)
    except HloError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _shape_text(array: np.ndarray) -> str:
    return f"{from_numpy(array.dtype).name}[{','.join(str(d) for d in array.shape)}]"


def _output_records(outputs: Sequence[np.ndarray]) -> list[dict]:
    return [
        {
            "name": f"out{index}",
            "dtype": from_numpy(array.dtype).name,
            "shape": list(array.shape),
            "digest": tensor_digest(array),
        }
        for index, array in enumerate(outputs)
    ]


def _preview(array: np.ndarray, count: int = 6) -> str:
    flat = array.reshape(-1)
    # numpy prints each scalar in the shortest form that identifies it in its own type.
    text = ", ".join(str(v) for v in flat[:count])
    return f"[{text}{', ...' if flat.size > count else ''}]"


def cmd_inspect(args: argparse.Namespace) -> int:
    program = _read_program(args.module)
    report = {
        "module": program.module.name,
        "source_hash": program.source_hash,
        "hlo_hash": program.hlo_hash,
        "parameters": [str(s) for s in program.parameter_shapes],
        "result": str(program.result_shape),
        "computations": len(program.module.reachable_computations()),
        "opcode_counts": program.opcode_counts(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"module       {report['module']}")
    print(f"source_hash  {report['source_hash']}")
    print(f"hlo_hash     {report['hlo_hash']}")
    print(f"parameters   {', '.join(report['parameters']) or '(none)'}")
    print(f"result       {report['result']}")
    print(f"computations {report['computations']}")
    print("opcodes      " + ", ".join(f"{op} x{n}" for op, n in report["opcode_counts"].items()))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    program = _read_program(args.module)
    try:
        inputs = [load_npy(path) for path in args.inputs]
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        outputs = evaluate(program.module, inputs, max_while_iterations=args.max_while_iterations)
    except EvaluationError as exc:
        raise UsageError(f"{args.module}: {exc}") from None
    if args.out:
        save_npz_atomic(args.out, outputs)
    records = _output_records(outputs)
    report = {
        "backend": args.backend,
        "source_hash": program.source_hash,
        "hlo_hash": program.hlo_hash,
        "graph_hash": None,
        "binary_hash": None,
        "outputs": records,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"backend      {args.backend}")
    print(f"source_hash  {program.source_hash}")
    print(f"hlo_hash     {program.hlo_hash}")
    for record, array in zip(records, outputs, strict=True):
        print(f"{record['name']:<6} {_shape_text(array):<18} {record['digest']}")
        print(f"       {_preview(array)}")
    if args.out:
        print(f"wrote {args.out}")
    return EXIT_OK


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vxla",
        description="Verifiable, bit-reproducible execution of XLA HLO programs.",
        epilog="Exit status: 0 success, 1 verification failed or outputs differ, 2 bad input.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    inspect = commands.add_parser(
        "inspect",
        help="parse and verify an HLO module; print its hashes and op counts",
        description="Parse and verify an HLO text module (as JAX's "
        "jax.jit(f).lower(...).as_text(dialect='hlo') or an XLA dump prints it) and print "
        "source_hash (SHA-256 of the file), hlo_hash (SHA-256 of the canonical text) and "
        "the instruction counts per opcode.",
    )
    inspect.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.set_defaults(handler=cmd_inspect)

    run = commands.add_parser(
        "run",
        help="run an HLO module on .npy inputs",
        description="Run an HLO module on inputs given as .npy files in parameter order and "
        "print each output's type, shape and digest. The reference backend evaluates the "
        "numerics contract directly with numpy (slow, exact).",
    )
    run.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    run.add_argument("inputs", metavar="IN.npy", nargs="*", help="inputs, in parameter order")
    run.add_argument("--backend", choices=["reference"], default="reference", help="execution backend (default: reference)")
    run.add_argument("--out", metavar="OUT.npz", help="write outputs as out0, out1, ... to an .npz file")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--max-while-iterations", type=_positive_int, metavar="N", help="stop a while loop after N iterations (bad input)")
    run.set_defaults(handler=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return args.handler(args)
    except UsageError as exc:
        print(f"vxla {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
