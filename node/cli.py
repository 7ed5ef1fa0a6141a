"""The `vxla` command line.

Exit status: 0 success; 1 verification failed or outputs differ; 2 bad input or usage, with a
message on stderr that names the problem (for HLO: line and column).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest import (
    KeyFileError,
    StatementError,
    init_key_files,
    key_id,
    load_private_key,
    load_public_key,
    normalize_contract,
    sign_statement,
)
from attest.digests import tensor_digest
from compiler.atomic_files import write_text_atomic
from compiler.config import CompilerConfig, ConfigError, load_config, validate_target
from compiler.driver import compile_program, generate
from compiler.errors import ExecutionError
from compiler.hlo import HloError, Module, canonical_text
from compiler.numerics.dtypes import from_numpy
from compiler.passes.pipeline import PIPELINES, pipeline_named
from compiler.program import Program, load_program
from compiler.reference import evaluate
from compiler.runtime.executable import Executable, Fault
from compiler.runtime.host import TargetNotRunnable, this_host
from node.tensors import TensorFileError, load_npy, save_npz_atomic
from node.trace import TraceInputError, VerifyReport, build_statement, default_job_id, verify_trace

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


def _require_runnable(config: CompilerConfig) -> None:
    """UsageError (exit 2) naming the missing features unless this host can run `config`'s
    code; nothing is compiled or run first."""
    try:
        this_host().check(config)
    except TargetNotRunnable as exc:
        raise UsageError(str(exc)) from None


def _compile(args: argparse.Namespace, program: Program, config: CompilerConfig | None = None) -> Executable:
    config = config or _config(args)
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


def _key_dir() -> Path:
    """The default key directory: $VXLA_HOME/keys, else ~/.vxla/keys."""
    home = os.environ.get("VXLA_HOME")
    return (Path(home) if home else Path.home() / ".vxla") / "keys"


def _passphrase(args: argparse.Namespace) -> bytes | None:
    """The key passphrase: --passphrase-file (its first line), else $VXLA_KEY_PASSPHRASE."""
    if getattr(args, "passphrase_file", None):
        try:
            data = Path(args.passphrase_file).read_bytes()
        except OSError as exc:
            raise UsageError(f"--passphrase-file {args.passphrase_file}: cannot read ({exc.strerror or exc})") from None
        # A file written by `echo` ends with a newline that is not part of the passphrase.
        passphrase = data.splitlines()[0] if data.strip() else b""
        if not passphrase:
            raise UsageError(f"--passphrase-file {args.passphrase_file}: empty")
        return passphrase
    value = os.environ.get("VXLA_KEY_PASSPHRASE")
    return value.encode() if value else None


def _load_signing_key(args: argparse.Namespace) -> Ed25519PrivateKey:
    try:
        return load_private_key(args.key, _passphrase(args))
    except KeyFileError as exc:
        raise UsageError(f"--key {exc}") from None


def _fault(text: str) -> Fault:
    """INSTRUCTION:BIT, e.g. fusion.3:17 (names may contain ':', so split at the last one)."""
    name, sep, bit = text.rpartition(":")
    if not sep or not name or not bit.isdigit():
        raise argparse.ArgumentTypeError(f"expected INSTRUCTION:BIT (e.g. fusion.3:17), got {text!r}")
    return Fault(name, int(bit))


def _chain_id(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if not 0 <= value < 2**256:
        raise argparse.ArgumentTypeError(f"expected an integer in 0..2**256-1, got {value}")
    return value


def _contract(text: str) -> str:
    try:
        return normalize_contract(text)
    except StatementError:
        raise argparse.ArgumentTypeError(f"expected 0x followed by 40 hex characters, got {text!r}") from None


def _check_run_options(args: argparse.Namespace) -> None:
    """Refuse inconsistent tracing options before anything runs or is written."""
    tracing = [name for name, value in (("--op-level", args.op_level), ("--job-id", args.job_id), ("--chain-id", args.chain_id), ("--contract", args.contract)) if value not in (None, False)]
    if args.trace is None and (args.key or tracing):
        raise UsageError(f"{args.key and '--key' or tracing[0]} needs --trace TRACE.json")
    if args.trace is not None and not args.key:
        raise UsageError("--trace needs --key KEYFILE (the node's private key; see vxla keys init)")
    if args.backend == "reference" and (args.trace is not None or args.fault is not None):
        raise UsageError("--trace and --fault need the llvm backend (the reference evaluator has no binary to attest)")
    if args.job_id is not None and not args.job_id:
        raise UsageError("--job-id must not be empty")
    for name, path in (("--trace", args.trace), ("--out", args.out)):
        if path is not None and Path(path).is_dir():
            raise UsageError(f"{name} {path}: is a directory")


def cmd_run(args: argparse.Namespace) -> int:
    _check_run_options(args)
    signing_key = _load_signing_key(args) if args.trace is not None else None
    program = _read_program(args.module)
    try:
        inputs = [load_npy(path) for path in args.inputs]
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    hashes: dict[str, str | None] = {"graph_hash": None, "binary_hash": None}
    traced = None
    try:
        if args.backend == "reference":
            outputs = evaluate(program.module, inputs, max_while_iterations=args.max_while_iterations)
        else:
            started = time.perf_counter_ns()
            config = _config(args)
            _require_runnable(config)
            executable = _compile(args, program, config)
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
    except ExecutionError as exc:
        raise UsageError(f"{args.module}: {exc}") from None
    envelope_text = None
    if signing_key is not None:
        try:
            statement = build_statement(
                program, executable, inputs, traced if traced is not None else outputs,
                job_id=args.job_id or default_job_id(program, inputs), chain_id=args.chain_id,
                contract=args.contract, key_id=key_id(signing_key), threads=args.threads,
                timings_ns={"compile": compiled - started, "execute": executed - compiled}, op_level=args.op_level,
            )  # fmt: skip
        except (ValueError, TraceInputError) as exc:
            raise UsageError(f"--trace: {exc}") from None
        envelope_text = sign_statement(statement, signing_key).to_json() + "\n"
    if args.out:
        save_npz_atomic(args.out, outputs)
    if envelope_text is not None:
        write_text_atomic(args.trace, envelope_text)
    records = _output_records(outputs)
    report = {
        "backend": args.backend,
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
    for key in ("source_hash", "hlo_hash", "graph_hash", "binary_hash"):
        if report[key] is not None:
            print(f"{key:<12} {report[key]}")
    for record, array in zip(records, outputs, strict=True):
        print(f"{record['name']:<6} {_shape_text(array):<18} {record['digest']}")
        print(f"       {_preview(array)}")
    if args.out:
        print(f"wrote {args.out}")
    if signing_key is not None:
        level = "op-level" if args.op_level else "outputs-only"
        fault = f", fault injected at {args.fault.instruction} bit {args.fault.bit}" if args.fault else ""
        print(f"wrote {args.trace} ({level} trace signed by {key_id(signing_key)[:16]}{fault})")
    return EXIT_OK


def _trusted_keys(args: argparse.Namespace) -> list[Ed25519PublicKey]:
    """--trusted-key files, else every *.pub in the default key directory."""
    paths = [Path(p) for p in args.trusted_key] if args.trusted_key else sorted(_key_dir().glob("*.pub"))
    if not paths:
        raise UsageError(f"no trusted keys: give --trusted-key PUB.pem, or put public keys (*.pub) in {_key_dir()} (vxla keys init)")
    try:
        return [load_public_key(path) for path in paths]
    except KeyFileError as exc:
        raise UsageError(f"trusted key {exc}") from None


def _print_report(report: VerifyReport, trace_path: str) -> None:
    predicate = None if report.statement is None else report.statement.predicate
    print(f"trace        {trace_path}")
    if predicate is not None:
        binding = f"job {predicate.job_id}"
        if predicate.chain_id is not None:
            binding += f", chain {predicate.chain_id}"
        if predicate.contract is not None:
            binding += f", contract {predicate.contract}"
        print(f"             {binding}, signed by {predicate.key_id[:16]}")
    for check in report.checks:
        print(f"{'ok' if check.ok else 'FAILED':<6} {check.name:<14} {check.message}")
    for item in report.not_checked:
        print(f"{'-':<6} {'not checked':<14} {item}")
    if report.first_divergence is not None:
        print(f"first divergence: {report.first_divergence.line()}")
    if report.ok:
        print("result: verified")
    else:
        print("result: DIFFERENT: " + ", ".join(c.name for c in report.failed) + " failed")


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        envelope_text = Path(args.trace).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{args.trace}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{args.trace}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"{args.trace}: cannot read ({exc.strerror})") from None
    if args.inputs and not args.module:
        raise UsageError("--inputs needs --module MODULE.hlo (inputs are checked by re-executing it)")
    module_source = _read_program(args.module).source if args.module else None
    try:
        inputs = [load_npy(path) for path in args.inputs] if args.module else None
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    trusted = _trusted_keys(args)
    try:
        report = verify_trace(
            envelope_text, trusted, module_source=module_source, inputs=inputs,
            job_id=args.job_id, chain_id=args.chain_id, contract=args.contract, threads=args.threads,
            execute_on=args.execute_on,
        )  # fmt: skip
    except TraceInputError as exc:
        raise UsageError(f"{args.trace}: {exc}" if str(exc).startswith("not a signed trace") else str(exc)) from None
    if args.json:
        print(json.dumps({"trace": args.trace, **report.to_dict()}, indent=2))
    else:
        _print_report(report, args.trace)
    return EXIT_OK if report.ok else EXIT_DIFFERENT


def cmd_keys_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir) if args.dir else _key_dir()
    passphrase = _passphrase(args)
    try:
        files = init_key_files(directory, passphrase=passphrase)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{directory}: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps({"key_id": files.key_id, "private_key": str(files.private_path), "public_key": str(files.public_path), "encrypted": passphrase is not None}, indent=2))
        return EXIT_OK
    print(f"key_id       {files.key_id}")
    print(f"private key  {files.private_path}{' (passphrase-encrypted)' if passphrase else ''}")
    print(f"public key   {files.public_path}")
    return EXIT_OK


def _node_config(path: str | None):  # -> node.config.NodeConfig (imported lazily)
    """--config, else configs/node.toml when present, else the built-in defaults."""
    from node.config import ConfigError, load_config, parse_config

    try:
        if path is not None:
            return load_config(path)
        if Path("configs/node.toml").is_file():
            return load_config("configs/node.toml")
        return parse_config("")
    except ConfigError as exc:
        raise UsageError(f"--config {path or 'configs/node.toml'}: {exc}") from None


def cmd_node_run(args: argparse.Namespace) -> int:
    # Imported here: the HTTP stack costs import time the other commands do not need.
    import logging

    from node.api import NodeServer

    config = _node_config(args.config)
    try:
        this_host().check(load_config())
    except (TargetNotRunnable, ConfigError) as exc:
        raise UsageError(f"configs/compiler.toml [target]: {exc}") from None
    try:
        signing_key = load_private_key(config.key_file, config.key_passphrase)
    except KeyFileError as exc:
        raise UsageError(f"node.key_file {exc} (create one with vxla keys init)") from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        server = NodeServer(config, signing_key)
    except OSError as exc:
        raise UsageError(f"node.host/node.port {config.host}:{config.port}: cannot listen ({exc.strerror or exc})") from None
    print(f"vxla node {key_id(signing_key)[:16]} serving {server.url} (data {config.data_dir})", file=sys.stderr)
    requeued = server.run()
    print(f"vxla node stopped; {len(requeued)} running job(s) requeued", file=sys.stderr)
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    import httpx

    from node.sdk import Client, IntegrityError, JobFailed, NodeError

    module = Path(args.module)
    if not module.is_file():
        raise UsageError(f"{args.module}: no such file")
    for path in args.inputs:
        try:
            load_npy(path)  # checked here so a bad file is named before anything is sent
        except TensorFileError as exc:
            raise UsageError(str(exc)) from None
    client = Client(args.node, chain=_devnet_submitter(Path(args.devnet)) if args.devnet else None)
    try:
        job = client.submit(module, [Path(p) for p in args.inputs], redundancy=args.redundancy)
        report: dict = {"node": client.url, "job": job.info}
        if args.wait:
            def progress(current) -> None:
                if not args.json:
                    print(f"job {current.id} {current.state}", file=sys.stderr)

            job.wait(timeout=args.timeout, progress=progress)
            report["job"] = job.info
            outputs = job.outputs()
            report["outputs"] = _output_records(outputs)
            if args.out:
                save_npz_atomic(args.out, outputs)
    except NodeError as exc:
        raise UsageError(f"{args.node}: {exc.detail} (HTTP {exc.status})") from None
    except httpx.HTTPError as exc:
        raise UsageError(f"--node {args.node}: cannot reach the node ({exc})") from None
    except JobFailed as exc:
        raise UsageError(str(exc)) from None
    except TimeoutError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    except IntegrityError as exc:
        print(f"vxla submit: {exc}", file=sys.stderr)
        return EXIT_DIFFERENT
    finally:
        client.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"job          {job.id}")
    print(f"state        {job.state}")
    if args.wait:
        if job.on_chain:
            print(f"result       {job.info['result_digest']} (finalized on chain)")
        trace = job.info.get("trace_digest") or (job.info.get("local") or {}).get("trace_digest")
        print(f"trace_digest {trace}")
        for record in report["outputs"]:
            print(f"{record['name']:<6} {record['dtype']}{record['shape']} {record['digest']}")
        if args.out:
            print(f"wrote {args.out}")
    return EXIT_OK


def _devnet_submitter(directory: Path):  # -> node.sdk.ChainSubmitter (imported lazily)
    """The devnet's market and submitter account, from its state file."""
    from web3 import HTTPProvider, Web3

    from node.chain import ChainClient, JobMarket
    from node.devnet import DevnetError, DevnetState
    from node.sdk import ChainSubmitter

    try:
        state = DevnetState.load(directory)
    except DevnetError as exc:
        raise UsageError(f"--devnet: {exc}") from None
    client = ChainClient(Web3(HTTPProvider(state.rpc_url, request_kwargs={"timeout": 30})))
    return ChainSubmitter(JobMarket(client, state.job_market), state.submitter)


def _devnet_dir(args: argparse.Namespace) -> Path:
    return Path(args.dir) if args.dir else Path(".devnet")


def _fault_spec(text: str) -> tuple[int, str]:
    """NODE=INSTRUCTION:BIT for --fault."""
    node, sep, rest = text.partition("=")
    instruction, sep2, bit = rest.partition(":")
    if not sep or not node.isdigit() or not instruction or (sep2 and not bit.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NODE=INSTRUCTION[:BIT], got {text!r}")
    return int(node), f"{instruction}:{int(bit or 0)}"


def cmd_devnet_up(args: argparse.Namespace) -> int:
    from node.devnet import DevnetError, up

    try:
        state = up(_devnet_dir(args), args.nodes, faults=dict(args.fault or []))
    except DevnetError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(state.to_json(), end="")
        return EXIT_OK
    print(f"anvil     {state.rpc_url} (pid {state.anvil.pid}, chain id {state.chain_id})")
    print(f"market    {state.job_market}")
    print(f"registry  {state.node_registry}")
    print(f"submitter {state.submitter}")
    for node in state.nodes:
        fault = f"  FAULT INJECTION {node.fault} (demo only)" if node.fault else ""
        print(f"node{node.index}     {node.url} (pid {node.process.pid}, account {node.account}){fault}")
    print(f"state     {Path(state.directory) / 'state.json'}")
    return EXIT_OK


def cmd_devnet_status(args: argparse.Namespace) -> int:
    from node.devnet import DevnetError, status

    try:
        report = status(_devnet_dir(args))
    except DevnetError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    anvil = report["anvil"]
    running = f"running, block {anvil.get('block')}, {anvil.get('jobs_posted')} job(s) posted"
    print(f"anvil  {report['rpc_url']} pid {anvil['pid']} {running if anvil['running'] else 'NOT RUNNING'}")
    for node in report["nodes"]:
        stake = node.get("stake_wei")
        stake_text = "?" if stake is None else f"{stake / 10**18:g} ETH"
        print(
            f"node{node['index']}  {node['url']} pid {node['pid']} {'running' if node['running'] else 'NOT RUNNING'}"
            f"  healthz {'ok' if node['healthz'] else 'down'}  readyz {'ok' if node['readyz'] else 'no'}  stake {stake_text}"
            + (f"  fault {node['fault']}" if node["fault"] else "")
        )
    return EXIT_OK


def cmd_devnet_down(args: argparse.Namespace) -> int:
    from node.devnet import DevnetError, down

    try:
        stopped = down(_devnet_dir(args))
    except DevnetError as exc:
        raise UsageError(str(exc)) from None
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
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
    parser.add_argument("--target", metavar="CPU", help="pinned CPU name: x86-64-v2, x86-64-v3, x86-64-v4, neoverse-n1 (NEON) or neoverse-v1 (SVE); the triple follows (default: configs/compiler.toml). Any target compiles on any host; it runs only where the host has its features")
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
    traces = run.add_argument_group(
        "signed traces",
        "With --trace, write a DSSE envelope (in-toto Statement, Ed25519) that binds the program, "
        "compiler identity, graph_hash, binary_hash, input and output digests and the job; "
        "check it with vxla verify.",
    )
    traces.add_argument("--trace", metavar="TRACE.json", help="write a signed execution trace to TRACE.json (needs --key)")
    traces.add_argument("--key", metavar="KEYFILE", help="the node's Ed25519 private key (PEM), e.g. ~/.vxla/keys/node.key from vxla keys init")
    traces.add_argument("--passphrase-file", metavar="FILE", help="passphrase of an encrypted key (first line of FILE; default: $VXLA_KEY_PASSPHRASE)")
    traces.add_argument("--op-level", action="store_true", help="also record every instruction's output digest in schedule order and their Merkle root, so a verifier can name the first diverging instruction")
    traces.add_argument("--job-id", metavar="ID", help="job the trace is for (default: local-<hash of hlo_hash and input digests>)")
    traces.add_argument("--chain-id", type=_chain_id, metavar="N", help="EVM chain id the trace is for (replay protection)")
    traces.add_argument("--contract", type=_contract, metavar="0x...", help="contract address the trace is for (replay protection)")
    traces.add_argument("--fault", type=_fault, metavar="INSTRUCTION:BIT", help="for tests and demos only: flip bit BIT of the named instruction's output (a name from an op-level trace) right after it is computed, as a faulty node would")
    run.set_defaults(handler=cmd_run)

    verify = commands.add_parser(
        "verify",
        help="check a signed trace: signatures, and by recompiling and re-executing, its hashes",
        description="Check a signed execution trace. Always: every signature against the trusted "
        "keys, the statement's structure and, when given, the job id, chain id and contract. "
        "With --module: source_hash and hlo_hash, then a fresh compilation with the recorded "
        "compiler configuration (refused if this vxla cannot reproduce it) checked against "
        "graph_hash and binary_hash. With --inputs too: the input digests, a re-execution and "
        "the output digests; when the trace has op-level data, the first instruction whose "
        "digest differs is printed (with its Merkle inclusion proofs checked).",
        epilog="Exit status: 0 every check passed, 1 something differs (the failed checks are "
        "named), 2 bad input (unreadable or malformed trace, missing files, no trusted keys).",
    )
    verify.add_argument("trace", metavar="TRACE.json", help="the signed trace (DSSE envelope JSON) from vxla run --trace")
    verify.add_argument("--module", metavar="MODULE.hlo", help="the HLO module the trace claims to run; recompiled and checked")
    verify.add_argument("--inputs", metavar="IN.npy", nargs="+", default=[], help="the inputs, in parameter order; re-executed and checked (needs --module)")
    verify.add_argument("--trusted-key", metavar="PUB.pem", action="append", default=[], help="a trusted public key (repeatable; default: every *.pub in $VXLA_HOME/keys or ~/.vxla/keys)")
    verify.add_argument("--job-id", metavar="ID", help="require this job id")
    verify.add_argument("--chain-id", type=_chain_id, metavar="N", help="require this chain id")
    verify.add_argument("--contract", type=_contract, metavar="0x...", help="require this contract address")
    verify.add_argument("--threads", type=_positive_int, default=1, metavar="N", help="worker threads for the re-execution (results do not depend on it; default 1)")
    verify.add_argument("--execute-on", metavar="CPU", help="re-execute on this target (default: the trace's target when this host runs it, else the pinned default, else the best target this host runs); the trace's own target is always compiled and its hashes checked")
    verify.add_argument("--json", action="store_true", help="print one JSON object: ok, checks [{name, ok, message}], not_checked, first_divergence")
    verify.set_defaults(handler=cmd_verify)

    node = commands.add_parser("node", help="run a worker node", description="Run a vxla worker node.")
    node_commands = node.add_subparsers(dest="node_command", metavar="SUBCOMMAND")
    node_commands.required = True
    node_run = node_commands.add_parser(
        "run",
        help="serve the node's HTTP API and run queued jobs",
        description="Start the node: the job store and blobs under node.data_dir, the worker "
        "pool, and the HTTP API on node.host:node.port. SIGINT or SIGTERM stops it cleanly "
        "(running jobs finish, or are requeued and redone at the next start). With chain.rpc_url "
        "set it also follows the JobMarket: it claims, executes, commits, reveals and finalizes "
        "jobs, re-executes a share of other nodes' jobs (chain.verify_fraction) and reports where "
        "a diverging node's trace parts from its own (GET /v1/chain/jobs/ID/divergence). Logs go "
        "to stderr.",
    )
    node_run.add_argument("--config", metavar="TOML", help="node configuration (default: configs/node.toml if present, else built-in defaults); the key passphrase comes from $VXLA_KEY_PASSPHRASE")
    node_run.set_defaults(handler=cmd_node_run)

    submit = commands.add_parser(
        "submit",
        help="submit a job to a node",
        description="Upload the inputs to a node, queue MODULE.hlo on them and print the job id; "
        "with --wait, wait for it and print the output digests (each output checked against "
        "the signed trace's digest).",
    )
    submit.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    submit.add_argument("inputs", metavar="IN.npy", nargs="*", help="inputs, in parameter order")
    submit.add_argument("--node", required=True, metavar="URL", help="the node's URL, e.g. http://127.0.0.1:8700")
    submit.add_argument("--redundancy", type=_positive_int, default=1, metavar="K", help="nodes that must run the job (above 1: post it on chain, with --devnet)")
    submit.add_argument("--devnet", metavar="DIR", help="post the job on the devnet in DIR (its market and submitter account); --wait follows it to finalization")
    submit.add_argument("--wait", action="store_true", help="wait until the job is done and print its outputs")
    submit.add_argument("--timeout", type=float, default=None, metavar="S", help="with --wait: give up after S seconds")
    submit.add_argument("--out", metavar="OUT.npz", help="with --wait: write the outputs as out0, out1, ...")
    submit.add_argument("--json", action="store_true", help="print one JSON object")
    submit.set_defaults(handler=cmd_submit)

    keys = commands.add_parser("keys", help="manage the node's signing keys", description="Manage the node's Ed25519 signing keys.")
    key_commands = keys.add_subparsers(dest="keys_command", metavar="SUBCOMMAND")
    key_commands.required = True
    keys_init = key_commands.add_parser(
        "init",
        help="create a new key pair (node.key, node.pub)",
        description="Create a new Ed25519 key pair: DIR/node.key (PKCS#8 PEM, mode 0600, encrypted "
        "when a passphrase is given) and DIR/node.pub. Prints the key id (SHA-256 of the raw "
        "public key). Refuses to overwrite existing key files.",
    )
    keys_init.add_argument("--dir", metavar="DIR", help="key directory (default: $VXLA_HOME/keys, else ~/.vxla/keys)")
    keys_init.add_argument("--passphrase-file", metavar="FILE", help="encrypt the private key with the first line of FILE (default: $VXLA_KEY_PASSPHRASE if set)")
    keys_init.add_argument("--json", action="store_true", help="print one JSON object")
    keys_init.set_defaults(handler=cmd_keys_init)

    devnet = commands.add_parser("devnet", help="a local chain with N nodes", description="A local devnet: anvil, the contracts and N registered nodes, as child processes.")
    devnet_commands = devnet.add_subparsers(dest="devnet_command", metavar="SUBCOMMAND")
    devnet_commands.required = True
    devnet_up = devnet_commands.add_parser("up", help="start anvil, deploy, register and start N nodes", description="Start anvil on 127.0.0.1, deploy the contracts, and start N nodes (own keys, data dirs, ports, staked accounts); writes DIR/state.json.")
    devnet_up.add_argument("--nodes", type=_positive_int, default=3, metavar="N", help="number of nodes (default 3)")
    devnet_up.add_argument("--fault", type=_fault_spec, action="append", metavar="NODE=INSTRUCTION[:BIT]", help="test/demo only: start node NODE with fault injection (flips BIT of INSTRUCTION's output)")
    devnet_up.add_argument("--json", action="store_true", help="print the state as JSON")
    devnet_status = devnet_commands.add_parser("status", help="show anvil and each node", description="Show anvil and each node: process, healthz, readyz, stake.")
    devnet_status.add_argument("--json", action="store_true", help="print one JSON object")
    devnet_down = devnet_commands.add_parser("down", help="stop what `devnet up` started", description="Stop exactly the processes in DIR/state.json (each checked to still be ours) and nothing else.")
    for sub, handler in ((devnet_up, cmd_devnet_up), (devnet_status, cmd_devnet_status), (devnet_down, cmd_devnet_down)):
        sub.add_argument("--dir", metavar="DIR", help="devnet directory (default .devnet)")
        sub.set_defaults(handler=handler)
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
