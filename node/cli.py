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
from compiler.atomic_files import write_text_atomic
from compiler.codegen.target import CompilerConfig, ConfigError, load_config, validate_target
from compiler.driver import compile_program, generate
from compiler.hlo import HloError, Module, canonical_text
from compiler.hlo.dtypes import from_numpy
from compiler.passes.pipeline import PIPELINES, pipeline_named
from compiler.program import Program, load_program
from compiler.reference import EvaluationError, evaluate
from compiler.runtime.executable import Executable
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


def _config(args: argparse.Namespace) -> CompilerConfig:
    try:
        config = load_config(args.config) if getattr(args, "config", None) else load_config()
        if args.target:
            config = config.with_target(cpu=args.target)
            validate_target(config)
        if getattr(args, "pipeline", None):
            config = config.with_pipeline(args.pipeline)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config


def _compile(args: argparse.Namespace, program: Program) -> Executable:
    config = _config(args)
    try:
        return compile_program(program, config, threads=getattr(args, "threads", 1) or 1)
    except HloError as exc:
        raise UsageError(f"{args.module}: {exc}") from None


def _dump_directory(path: str) -> Path:
    """The --dump-passes directory, created if needed; refused if it is a file."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--dump-passes {path}: not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--dump-passes {path}: {exc.strerror}") from None
    return directory


def _dump_passes(directory: Path, program: Program, config: CompilerConfig) -> list[str]:
    """Writes the module before and after every pass, and the hashed optimized graph; returns
    the file names written, in order."""
    written: list[str] = []

    def write(name: str, text: str) -> None:
        write_text_atomic(directory / name, text)
        written.append(name)

    def observe(number: int, pass_name: str, module: Module) -> None:
        write(f"{number:03d}-{pass_name}.hlo", canonical_text(module))

    write("000-input.hlo", program.canonical_text)
    _, _, graph_text = generate(program, config, observe)
    write("graph.txt", graph_text)
    return written


def cmd_compile(args: argparse.Namespace) -> int:
    program = _read_program(args.module)
    directory = _dump_directory(args.dump_passes) if args.dump_passes else None
    executable = _compile(args, program)
    plan = executable.plan
    config = executable.config
    report = {
        "source_hash": program.source_hash,
        **executable.hashes,
        "config": config.as_dict(),
        "passes": pipeline_named(config.pipeline).pass_names(),
        "kernels": len(executable.plan_kernels()),
        "peak_bytes": plan.arena_bytes,
        "no_reuse_bytes": plan.no_reuse_bytes,
        "object_bytes": len(executable.object_bytes),
    }
    if directory is not None:
        report["dumped"] = [str(directory / name) for name in _dump_passes(directory, program, config)]
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    for key in ("source_hash", "hlo_hash", "graph_hash", "binary_hash"):
        print(f"{key:<12} {report[key]}")
    print(f"target       {config.triple} cpu={config.cpu} features={config.features or '-'} opt={config.opt_level}")
    print(f"pipeline     {config.pipeline} {config.pipeline_id[:16]} ({len(report['passes'])} passes)")
    saved = 1 - plan.arena_bytes / plan.no_reuse_bytes if plan.no_reuse_bytes else 0.0
    print(f"memory       peak {plan.arena_bytes} bytes, {plan.no_reuse_bytes} without reuse ({saved:.1%} saved)")
    print(f"kernels      {report['kernels']}, object {report['object_bytes']} bytes")
    if directory is not None:
        print(f"dumped       {len(report['dumped'])} files to {directory}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    program = _read_program(args.module)
    try:
        inputs = [load_npy(path) for path in args.inputs]
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    hashes: dict[str, str | None] = {"graph_hash": None, "binary_hash": None}
    try:
        if args.backend == "reference":
            outputs = evaluate(program.module, inputs, max_while_iterations=args.max_while_iterations)
        else:
            executable = _compile(args, program)
            hashes = dict(executable.hashes)
            outputs = executable.run(*inputs, threads=args.threads, max_while_iterations=args.max_while_iterations)
    except EvaluationError as exc:
        raise UsageError(f"{args.module}: {exc}") from None
    if args.out:
        save_npz_atomic(args.out, outputs)
    records = _output_records(outputs)
    report = {
        "backend": args.backend,
        "source_hash": program.source_hash,
        "hlo_hash": program.hlo_hash,
        "graph_hash": hashes["graph_hash"],
        "binary_hash": hashes["binary_hash"],
        "outputs": records,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"backend      {args.backend}")
    for key in ("source_hash", "hlo_hash", "graph_hash", "binary_hash"):
        if report[key] is not None:
            print(f"{key:<12} {report[key]}")
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


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", metavar="CPU", help="LLVM CPU name, e.g. x86-64-v2, x86-64-v3, x86-64-v4 (default: configs/compiler.toml)")
    parser.add_argument("--config", metavar="TOML", help="compiler configuration file (default: configs/compiler.toml)")


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

    compile_ = commands.add_parser(
        "compile",
        help="compile an HLO module to pinned native code; print its hashes",
        description="Compile an HLO module for the pinned target (configs/compiler.toml, or "
        "--target) and print hlo_hash, graph_hash (the optimized graph) and binary_hash "
        "(the exact object bytes that run). Compiled objects are cached by hlo_hash and the "
        "whole compiler configuration.",
    )
    compile_.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    _add_target_options(compile_)
    compile_.add_argument("--pipeline", choices=sorted(PIPELINES), help="pass pipeline: default optimizes, none lowers the module as written (default: configs/compiler.toml)")
    compile_.add_argument("--dump-passes", metavar="DIR", help="write the module after every pass (NNN-PASS.hlo, canonical text) and the hashed optimized graph (graph.txt, whose SHA-256 is graph_hash) to DIR")
    compile_.add_argument("--json", action="store_true", help="print one JSON object")
    compile_.set_defaults(handler=cmd_compile, threads=1)

    run = commands.add_parser(
        "run",
        help="run an HLO module on .npy inputs",
        description="Run an HLO module on inputs given as .npy files in parameter order and "
        "print each output's type, shape and digest. The llvm backend (default) runs pinned "
        "native code; the reference backend evaluates the numerics contract directly with "
        "numpy (slow). Both give the same bits.",
    )
    run.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    run.add_argument("inputs", metavar="IN.npy", nargs="*", help="inputs, in parameter order")
    run.add_argument("--backend", choices=["llvm", "reference"], default="llvm", help="execution backend (default: llvm)")
    _add_target_options(run)
    run.add_argument("--threads", type=_positive_int, default=1, metavar="N", help="worker threads (results do not depend on it; default 1)")
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
