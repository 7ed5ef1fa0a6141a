"""`vxla inspect`, `vxla compile` and `vxla run`: a module's hashes, its compiled form, and its
outputs (native or reference), optionally with a signed trace.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from attest import (
    key_id,
    sign_statement,
)
from compiler.api import (
    ArgumentError,
    CompilerConfig,
    ConfigError,
    ExecutionError,
    Module,
    Program,
    canonical_text,
    evaluate,
    generate,
    pipeline_named,
)
from core.atomic_files import write_bytes_atomic, write_text_atomic
from node.cli.common import (
    compile_module,
    compiler_config,
    load_signing_key,
    output_records,
    preview,
    read_hlo_text,
    read_program,
    read_user_file,
    require_runnable,
    shape_text,
    spinner,
)
from node.cli.profiles import Profile
from node.cli.usage import EXIT_OK, UsageError
from node.tensors import TensorFileError, load_npy, save_npz_atomic
from node.tracing.statement import TraceInputError, build_statement, default_job_id, tensor_records


def cmd_convert(args: argparse.Namespace) -> int:
    text = read_hlo_text(args.program)
    if args.out:
        write_text_atomic(Path(args.out), text.decode("utf-8"))
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text.decode("utf-8"))
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    program = read_program(args.module)
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


def cmd_graph(args: argparse.Namespace) -> int:
    from node.graphs import GraphvizMissing, graph_picture, require_graphviz

    if not (args.svg or args.dot):
        raise UsageError("say where to write the picture: --svg OUT.svg and/or --dot OUT.dot")
    if args.svg:
        try:
            require_graphviz()  # before compiling: a large model takes a while
        except GraphvizMissing as exc:
            raise UsageError(f"--svg: {exc} (--dot writes the DOT text without it)") from None
    program = read_program(args.module)
    highlight, config = args.highlight, None
    if args.traces:
        if args.highlight:
            raise UsageError("--highlight or --traces, not both: the traces name the instruction")
        highlight, config, summary = _first_divergence(args.traces)
        if highlight is not None:
            from compiler.api import user_source

            source = user_source(program, config, highlight)
            summary += f" ({source})" if source else ""
        print(summary, file=sys.stderr)
    config = config or compiler_config(args)
    svg = b""
    with spinner(f"optimizing {args.module}") as say:  # (rich's spinner takes stdout while it spins)
        try:
            picture = graph_picture(program, config, highlight, args.group_depth)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.svg:
            if say is not None:
                say(f"laying out {len(picture.names)} instructions with Graphviz")
            try:
                svg = picture.svg()
            except GraphvizMissing as exc:
                raise UsageError(str(exc)) from None
    if args.dot:
        write_text_atomic(args.dot, picture.dot)
        print(f"wrote {args.dot}")
    if args.svg:
        write_bytes_atomic(args.svg, svg)
        print(f"wrote {args.svg}")
    if picture.path:
        print(f"path         {' -> '.join(picture.path)}")
    if args.group_depth and not picture.groups:
        print("not grouped: the module's metadata names no scopes of your code (the SDK keeps them with debug_info=True)", file=sys.stderr)
    return EXIT_OK


def _first_divergence(paths: list[str]) -> tuple[str | None, CompilerConfig, str]:
    """(the first instruction where two op-level traces differ, or None, the compiler
    configuration the first records, a line saying what was found)."""
    from attest import first_divergence
    from attest.statement import Statement
    from node.tracing.statement import TraceInputError
    from node.tracing.verify import parse_envelope, recorded_config

    statements = []
    for path in paths:
        try:
            statements.append(Statement.from_json_bytes(parse_envelope(read_user_file(path)).payload))
        except (TraceInputError, ValueError) as exc:
            raise UsageError(f"{path}: {exc}") from None
    try:
        config = recorded_config(statements[0].predicate.deterministic.compiler)
    except ConfigError as exc:
        raise UsageError(f"{paths[0]}: {exc}") from None
    divergence = first_divergence(*statements)
    first = divergence.first_instruction
    if first is None:
        return None, config, f"the traces part at no instruction: {divergence.summary()}"
    record = first.left if first.left is not None else first.right
    assert record is not None
    return record.name, config, f"first divergence: instruction {first.index} {record.name}"


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
    program = read_program(args.module)
    directory = _dump_directory(args.dump_passes) if args.dump_passes else None
    executable = compile_module(args, program)
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


def _user_source_of(error: ExecutionError, program: Program, args: argparse.Namespace) -> str:
    """` (the user's source: ...)` of the instruction a compiled run stopped at, where the
    HLO's metadata names one (the reference evaluator's messages name it themselves)."""
    from compiler.api import where_it_stopped

    return "" if args.backend == "reference" else where_it_stopped(error, program, compiler_config(args))


def _write_profile(args: argparse.Namespace, profile: Profile, program: Program, executable, inputs, times_ns: tuple[int, int, int]) -> None:  # noqa: ANN001
    """--profile: the compile's stages (heard as they ran), the run, then each step of the
    plan timed on its own in a second run, named with its op and the user's source."""
    from compiler.api import KernelStep, optimized_plan, work_ranges

    started, compiled, executed = (t / 1e9 for t in times_ns)
    profile.stage(None)
    if not any(event["tid"] == 1 for event in profile.events):
        profile.span("compile", "cached (compiled before: read from the compile cache)", started, compiled)
    profile.span("run", "run", compiled, executed, threads=str(args.threads))
    module, _ = optimized_plan(program, executable.config)
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    kernels = {step.instruction: step for step in executable.plan.steps if isinstance(step, KernelStep)}

    def about(name: str) -> dict[str, str]:
        instruction = by_name.get(name)
        if instruction is None:
            return {"op": name}
        facts = {"op": instruction.opcode}
        kernel = kernels.get(name)
        if kernel is not None:  # how the run splits its work items among the threads (compiler/runtime/threads.py)
            facts["threads"] = f"{len(work_ranges(kernel.extent, args.threads, kernel.grain))} of {args.threads}"
            facts["work items"] = str(kernel.extent)
        if instruction.opcode == "fusion":
            kind = instruction.attrs.get("kind", "")
            facts["op"] = f"fusion ({kind or 'fused'}, root {instruction.called_computations()[0].root.opcode})"
        if instruction.location is not None and instruction.location.user:
            facts["source"] = instruction.location.user
        return facts

    steps_began = time.perf_counter()
    profile.steps(steps_began, executable.step_times(*inputs, threads=args.threads), about)
    profile.write(args.profile)


def _check_run_options(args: argparse.Namespace) -> None:
    """Refuse inconsistent tracing options before anything runs or is written."""
    tracing = [name for name, value in (("--op-level", args.op_level), ("--job-id", args.job_id), ("--chain-id", args.chain_id), ("--contract", args.contract)) if value not in (None, False)]
    if args.trace is None and (args.key or tracing):
        raise UsageError(f"{args.key and '--key' or tracing[0]} needs --trace TRACE.json")
    if args.trace is not None and not args.key:
        raise UsageError("--trace needs --key KEYFILE (the node's private key; see vxla keys init)")
    if args.backend == "reference" and (args.trace is not None or args.fault is not None):
        raise UsageError("--trace and --fault need the llvm backend (the reference evaluator has no binary to attest)")
    if args.backend == "reference" and args.profile is not None:
        raise UsageError("--profile needs the llvm backend (it times the compiled plan's steps)")
    if args.job_id is not None and not args.job_id:
        raise UsageError("--job-id must not be empty")
    for name, path in (("--trace", args.trace), ("--out", args.out), ("--profile", args.profile)):
        if path is not None and Path(path).is_dir():
            raise UsageError(f"{name} {path}: is a directory")


def cmd_run(args: argparse.Namespace) -> int:
    _check_run_options(args)
    signing_key = load_signing_key(args) if args.trace is not None else None
    program = read_program(args.module)
    try:
        inputs = [load_npy(path) for path in args.inputs]
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        # Bound once, to the module's own types, before anything is compiled: the run, the
        # job id and the statement take them as they are, and each digest is taken once.
        inputs = program.bind(inputs)
    except ArgumentError as exc:
        raise UsageError(f"{args.module}: {exc}") from None
    hashes: dict[str, str | None] = {"graph_hash": None, "binary_hash": None}
    target = None  # the compilation target's CPU name (llvm backend)
    traced = None
    try:
        if args.backend == "reference":
            outputs = evaluate(program.module, inputs, max_while_iterations=args.max_while_iterations)
        else:
            started = time.perf_counter_ns()
            config = compiler_config(args)
            require_runnable(config)
            target = config.target_cpu
            profile = Profile(began=started / 1e9) if args.profile else None
            executable = compile_module(args, program, config, profile)
            compiled = time.perf_counter_ns()
            hashes = dict(executable.hashes)
            if args.op_level or args.fault is not None:
                try:
                    traced = executable.run_traced(*inputs, threads=args.threads, max_while_iterations=args.max_while_iterations, fault=args.fault)
                except ValueError as exc:
                    if isinstance(exc, ExecutionError):
                        raise
                    raise UsageError(f"--fault: {exc}") from None
                outputs = traced.outputs
            else:
                outputs = executable.run(*inputs, threads=args.threads, max_while_iterations=args.max_while_iterations)
            executed = time.perf_counter_ns()
            if profile is not None:
                _write_profile(args, profile, program, executable, inputs, (started, compiled, executed))
    except ExecutionError as exc:
        raise UsageError(f"{args.module}: {exc}{_user_source_of(exc, program, args)}") from None
    envelope_text = None
    statement = None
    if signing_key is not None:
        input_records = tensor_records(inputs, "in")
        try:
            statement = build_statement(
                program, executable, inputs, traced if traced is not None else outputs,
                job_id=args.job_id or default_job_id(program, input_records), chain_id=args.chain_id,
                contract=args.contract, key_id=key_id(signing_key), threads=args.threads,
                timings_ns={"compile": compiled - started, "execute": executed - compiled}, op_level=args.op_level,
                input_records=input_records,
            )  # fmt: skip
        except (ValueError, TraceInputError) as exc:
            raise UsageError(f"--trace: {exc}") from None
        envelope_text = sign_statement(statement, signing_key).to_json() + "\n"
    if args.out:
        save_npz_atomic(args.out, outputs)
    if envelope_text is not None:
        write_text_atomic(args.trace, envelope_text)
    # The statement's output records where there is one: the outputs are digested once.
    records = [r.to_dict() for r in statement.predicate.deterministic.outputs] if statement is not None else output_records(outputs)
    report = {
        "backend": args.backend,
        "target": target.name if target else None,
        "source_hash": program.source_hash,
        "hlo_hash": program.hlo_hash,
        "graph_hash": hashes["graph_hash"],
        "binary_hash": hashes["binary_hash"],
        "outputs": records,
    }
    if signing_key is not None:
        report["trace"] = args.trace
        report["key_id"] = key_id(signing_key)
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"backend      {args.backend}")
    if target is not None:
        print(f"target       {target.name} ({target.description})")
    for key in ("source_hash", "hlo_hash", "graph_hash", "binary_hash"):
        if report[key] is not None:
            print(f"{key:<12} {report[key]}")
    for record, array in zip(records, outputs, strict=True):
        print(f"{record['name']:<6} {shape_text(array):<18} {record['digest']}")
        print(f"       {preview(array)}")
    if args.out:
        print(f"wrote {args.out}")
    if signing_key is not None:
        level = "op-level" if args.op_level else "outputs-only"
        fault = f", fault injected at {args.fault.instruction} bit {args.fault.bit}" if args.fault else ""
        print(f"wrote {args.trace} ({level} trace signed by {key_id(signing_key)[:16]}{fault})")
    return EXIT_OK
