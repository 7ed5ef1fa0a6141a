"""`vxla verify`: check a signed trace by recompiling and re-executing it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from attest import (
    KeyFileError,
    load_public_key,
    parse_public_key,
)
from node.cli.arguments import CACHE_DEFAULT
from node.cli.common import (
    chosen_node,
    key_dir,
    node_session,
    read_program,
    read_user_file,
    spinner,
)
from node.cli.usage import EXIT_DIFFERENT, EXIT_NOT_RE_EXECUTED, EXIT_OK, UsageError
from node.tensors import TensorFileError, is_npy, load_npy
from node.tracing.statement import TraceInputError
from node.tracing.verify import VerifyReport, parse_envelope, verify_trace


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




def cmd_verify(args: argparse.Namespace) -> int:
    if args.node or args.devnet or args.job:
        return _verify_job(args)
    if args.trace is None:
        raise UsageError("give a trace (TRACE.json), or a node's job: --node URL --job ID")
    envelope_text = read_user_file(args.trace)
    if is_npy(envelope_text):
        raise UsageError(f"{args.trace}: an .npy array, not a signed trace (TRACE.json, from vxla run --trace)")
    try:
        parse_envelope(envelope_text)  # its form first: an .npy or a module is named as such, not as "no trusted keys"
    except TraceInputError as exc:
        raise UsageError(f"{args.trace}: {exc}") from None
    if args.inputs and not args.module:
        raise UsageError("--inputs needs --module MODULE.hlo (inputs are checked by re-executing it)")
    module_source = read_program(args.module).source if args.module else None
    try:
        inputs = [load_npy(path) for path in args.inputs] if args.inputs else None
    except TensorFileError as exc:
        raise UsageError(str(exc)) from None
    trusted = _trusted_keys(args)
    try:
        with spinner(f"verifying {args.trace}") as say:
            report = verify_trace(
                envelope_text, trusted, module_source=module_source, inputs=inputs,
                job_id=args.job_id, chain_id=args.chain_id, contract=args.contract, threads=args.threads,
                execute_on=args.execute_on, cache_dir=_cache_setting(args), progress=_saying(say, f"verifying {args.trace}"),
            )  # fmt: skip
    except TraceInputError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({"trace": args.trace, **report.to_dict(), "result": _result(report)}, indent=2))
    else:
        _print_report(report, args.trace)
    if not report.ok:
        return EXIT_DIFFERENT
    return EXIT_OK if report.verified else EXIT_NOT_RE_EXECUTED


def _saying(say: Callable[[str], None] | None, what: str) -> Callable[[str], None] | None:
    """A verification's stages said on the spinner (None without one)."""
    return None if say is None else lambda stage: say(f"{what}: {stage}")


def _cache_setting(args: argparse.Namespace) -> bool | str:
    """--cache: False without it, True for the default directory, else the directory given."""
    return False if args.cache is None else True if args.cache == CACHE_DEFAULT else args.cache


def _devnet_chain(args: argparse.Namespace) -> tuple[int | None, str | None]:
    """The chain id and market a chain job's trace must bind: --chain-id and --contract, else
    the devnet's (its state file, not the node's word); None where neither says (a node's
    own job binds neither unless told)."""
    from node.sdk import is_chain_job_id

    chain_id, contract = args.chain_id, args.contract
    if args.devnet and is_chain_job_id(args.job) and (chain_id is None or contract is None):
        from node.devnet_state import DevnetState

        state = DevnetState.load(Path(args.devnet))  # chosen_node read it already
        chain_id = state.chain_id if chain_id is None else chain_id
        contract = state.job_market if contract is None else contract
    return chain_id, contract


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
    chain_id, contract = _devnet_chain(args)
    label = f"{args.node} job {args.job}"
    with node_session(args, label) as client:
        try:
            job = client.job(args.job)
            if job.state != "done":
                raise UsageError(f"{label} is {job.state}, not done: nothing to verify yet")
            with spinner(f"verifying {label}") as say:
                report = job.verify(
                    execute=not args.no_execute, trusted_keys=trusted, threads=args.threads,
                    execute_on=args.execute_on, timeout=0, cache_dir=_cache_setting(args),
                    chain_id=chain_id, contract=contract, progress=_saying(say, f"verifying {label}"),
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
