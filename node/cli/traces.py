"""`vxla verify`: check a signed trace by recompiling and re-executing it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from attest import (
    KeyFileError,
    load_public_key,
    parse_public_key,
)
from compiler.api import machine_threads
from node.cli.common import (
    EXIT_DIFFERENT,
    EXIT_NOT_RE_EXECUTED,
    EXIT_OK,
    UsageError,
    add_node_options,
    chain_id_arg,
    chosen_node,
    contract_arg,
    key_dir,
    node_session,
    positive_int,
    read_program,
)
from node.tensors import TensorFileError, load_npy
from node.tracing.statement import TraceInputError
from node.tracing.verify import VerifyReport, verify_trace


def _given_keys(args: argparse.Namespace) -> list[Ed25519PublicKey]:
    """The --trusted-key keys: each a file (PEM, or the raw key in hex) or the hex itself."""
    keys = []
    for given in args.trusted_key:
        hex_digits = given.strip().removeprefix("0x")
        try:
            if len(hex_digits) == 64 and not Path(given).exists():
                keys.append(parse_public_key(hex_digits))
            else:
                keys.append(load_public_key(given))
        except KeyFileError as exc:
            raise UsageError(f"--trusted-key: {exc}") from None
    return keys


def _trusted_keys(args: argparse.Namespace) -> list[Ed25519PublicKey]:
    """--trusted-key keys, else every *.pub in the default key directory."""
    if args.trusted_key:
        return _given_keys(args)
    paths = sorted(key_dir().glob("*.pub"))
    if not paths:
        raise UsageError(f"no trusted keys: give --trusted-key PUB.pem, or put public keys (*.pub) in {key_dir()} (vxla keys init)")
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
    print(f"result: {_result(report)}")


def _result(report: VerifyReport) -> str:
    """The report's conclusion in words: verified only when the result was re-executed."""
    if not report.ok:
        return "DIFFERENT: " + ", ".join(c.name for c in report.failed) + " failed"
    if report.verified:
        return "verified"
    if any(c.name == "binary_hash" for c in report.checks):
        return "compilation verified, not re-executed: the outputs are not checked (give --inputs)"
    return "signatures valid, not re-executed: the program and outputs are not checked (give --module and --inputs)"


CACHE_DEFAULT = "default"  # --cache without a directory


def cmd_verify(args: argparse.Namespace) -> int:
    if args.node or args.devnet or args.job:
        return _verify_job(args)
    if args.trace is None:
        raise UsageError("give a trace (TRACE.json), or a node's job: --node URL --job ID")
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
    module_source = read_program(args.module).source if args.module else None
    try:
        inputs = [load_npy(path) for path in args.inputs] if args.inputs else None
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    trusted = _trusted_keys(args)
    try:
        report = verify_trace(
            envelope_text, trusted, module_source=module_source, inputs=inputs,
            job_id=args.job_id, chain_id=args.chain_id, contract=args.contract, threads=args.threads,
            execute_on=args.execute_on, cache_dir=_cache_setting(args),
        )  # fmt: skip
    except TraceInputError as exc:
        raise UsageError(f"{args.trace}: {exc}" if str(exc).startswith("not a signed trace") else str(exc)) from None
    if args.json:
        print(json.dumps({"trace": args.trace, **report.to_dict(), "result": _result(report)}, indent=2))
    else:
        _print_report(report, args.trace)
    if not report.ok:
        return EXIT_DIFFERENT
    return EXIT_OK if report.verified else EXIT_NOT_RE_EXECUTED


def _cache_setting(args: argparse.Namespace) -> bool | str:
    """--cache: False without it, True for the default directory, else the directory given."""
    return False if args.cache is None else True if args.cache == CACHE_DEFAULT else args.cache


def _verify_job(args: argparse.Namespace) -> int:
    """vxla verify --node URL --job ID: the job's trace, module and inputs fetched from the
    node (each checked against its digest) and verified here as a trace file would be. Bytes
    that are not what the trace records exit 1 (IntegrityError); an answer the SDK refuses
    (AnswerRefused: node.sdk's bounds) exits 2 through node_session, as a malformed trace file
    does: either way one line on stderr names the problem."""
    from node.sdk import IntegrityError, JobFailed

    if not ((args.node or args.devnet) and args.job):
        raise UsageError("--node URL (or --devnet DIR) and --job ID go together")
    args.node = chosen_node(args)
    if args.trace or args.module or args.inputs:
        raise UsageError("--node/--job fetch the trace, module and inputs: give no TRACE.json, --module or --inputs")
    trusted = _given_keys(args) or None  # None: the key the node serves
    label = f"{args.node} job {args.job}"
    with node_session(args, label) as client:
        try:
            job = client.job(args.job)
            if job.state != "done":
                raise UsageError(f"{label} is {job.state}, not done: nothing to verify yet")
            report = job.verify(
                execute=not args.no_execute, trusted_keys=trusted, threads=args.threads,
                execute_on=args.execute_on, timeout=0, cache_dir=_cache_setting(args),
            )  # fmt: skip
        except (JobFailed, TraceInputError) as exc:
            raise UsageError(f"{label}: {exc}") from None
        except IntegrityError as exc:
            print(f"vxla verify: {exc}", file=sys.stderr)
            return EXIT_DIFFERENT
    if args.json:
        print(json.dumps({"node": args.node, "job": args.job, **report.to_dict(), "result": _result(report)}, indent=2))
    else:
        if trusted is None:
            print(f"signature checked against the key {args.node} serves (GET /v1/key): it binds the trace to that node")
        _print_report(report, label)
    if not report.ok:
        return EXIT_DIFFERENT
    return EXIT_OK if report.verified else EXIT_NOT_RE_EXECUTED


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Adds this group's subcommands to the `vxla` parser."""
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
        epilog="Exit status: 0 verified (every check passed, the result re-executed), 1 something "
        "differs (the failed checks are named; with --node, also bytes that are not what the trace "
        "records), 2 bad input (unreadable or malformed trace, missing files, no trusted keys; with "
        "--node, a node that refuses or does not answer, or an answer refused: over its size bound, "
        "not complete by its deadline, a redirect, not the JSON or signed trace the route serves), "
        "3 every check made passed but the result was not re-executed "
        "(no --module, or no --inputs for a module that takes some): the trace is not verified.",
    )
    verify.add_argument("trace", metavar="TRACE.json", nargs="?", help="the signed trace (DSSE envelope JSON) from vxla run --trace")
    verify.add_argument("--module", metavar="MODULE.hlo", help="the HLO module the trace claims to run; recompiled and checked")
    verify.add_argument("--inputs", metavar="IN.npy", nargs="+", default=[], help="the inputs, in parameter order; re-executed and checked (needs --module)")
    verify.add_argument("--trusted-key", metavar="KEY", action="append", default=[], help="a trusted public key: a PEM file (vxla keys init), or the raw key in hex as GET /v1/key gives it, in a file or as is (repeatable; default: every *.pub in $VXLA_HOME/keys or ~/.vxla/keys; with --node, the key the node serves)")
    job = verify.add_argument_group(
        "a node's job",
        "With --node (or --devnet) and --job, the trace, the module and the inputs come from the node, each "
        "checked against its digest, and the job is re-executed here: no files needed.",
    )
    add_node_options(job, required=False)
    job.add_argument("--job", metavar="ID", help="the job's id on that node (a chain job's number, or the node's own job id)")
    job.add_argument("--no-execute", action="store_true", help="with --job: check signature and hashes only, without re-executing (exit 3)")
    verify.add_argument("--job-id", metavar="ID", help="require this job id")
    verify.add_argument("--chain-id", type=chain_id_arg, metavar="N", help="require this chain id")
    verify.add_argument("--contract", type=contract_arg, metavar="0x...", help="require this contract address")
    verify.add_argument("--threads", type=positive_int, default=machine_threads(), metavar="N", help="worker threads for the re-execution (results do not depend on it; default: this machine's %(default)s cores)")
    verify.add_argument("--execute-on", metavar="CPU", help="re-execute on this target (default: the trace's target when this host runs it, else the configuration's target, by default the widest this host runs); the trace's own target is always compiled and its hashes checked")
    verify.add_argument(
        "--cache", nargs="?", const=CACHE_DEFAULT, metavar="DIR",
        help="use this machine's compile cache (its default directory, or DIR): a program this vxla "
        "compiled there before is not compiled again, so verifying it costs about one run. Off by "
        "default, so that nothing another process wrote (a node's cache) enters a verdict; an entry's "
        "binary_hash is recomputed from its object and plan either way",
    )  # fmt: skip
    verify.add_argument("--json", action="store_true", help="print one JSON object: ok, verified, re_executed, result, checks [{name, ok, message}], not_checked, first_divergence")
    verify.set_defaults(handler=cmd_verify)
