"""`vxla submit` and `vxla devnet`: send jobs to a node (and to the chain), and run a local
chain with N nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from node.cli.common import (
    EXIT_DIFFERENT,
    EXIT_OK,
    UsageError,
    add_program_arguments,
    command_group,
    node_session,
    node_url_arg,
    output_records,
    positive_int,
    read_hlo_text,
)
from node.devnet_state import REFEREES
from node.tensors import TensorFileError, load_npy, save_npz_atomic


def cmd_submit(args: argparse.Namespace) -> int:
    from node.chain import ContractRevert
    from node.sdk import IntegrityError, JobFailed

    module = read_hlo_text(args.module).decode("utf-8", errors="replace")  # StableHLO converted here, before anything is sent
    for path in args.inputs:
        try:
            load_npy(path)  # checked here so a bad file is named before anything is sent
        except TensorFileError as exc:
            raise UsageError(str(exc)) from None
    if args.challenge_window is not None and not args.devnet:
        raise UsageError("--challenge-window: only a job posted on chain has one (with --devnet)")
    chain = _devnet_submitter(Path(args.devnet)) if args.devnet else None
    with node_session(args, chain=chain) as client:
        try:
            job = client.submit(module, [Path(p) for p in args.inputs], redundancy=args.redundancy, challenge_window=args.challenge_window)
            report: dict = {"node": client.url, "job": job.info}
            if args.wait:
                def progress(current) -> None:
                    if not args.json:
                        print(f"job {current.id} {current.stage}", file=sys.stderr, flush=True)

                job.wait(timeout=args.timeout, progress=progress)
                report["job"] = job.info
                outputs = job.outputs()
                report["outputs"] = output_records(outputs)
                if args.out:
                    save_npz_atomic(args.out, outputs)
        except JobFailed as exc:
            raise UsageError(str(exc)) from None
        except TimeoutError as exc:
            raise UsageError(f"--timeout: {exc}") from None
        except IntegrityError as exc:
            print(f"vxla submit: {exc}", file=sys.stderr)
            return EXIT_DIFFERENT
        except ContractRevert as exc:  # the market refused the post (a window under its minimum, say)
            raise UsageError(f"the JobMarket refused the job: {exc}") from None
        except ValueError as exc:  # the module's graph commitment could not be computed here
            raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"job          {job.id}")
    print(f"state        {job.state}")
    if args.wait:
        if job.on_chain:
            print(f"result       {job.info['result_digest']} (finalized on chain)")
        print(f"statement_digest {job.info.get('statement_digest')}")
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

    started = time.monotonic()

    def progress(step: str) -> None:
        print(f"[{time.monotonic() - started:4.1f} s] {step}", file=sys.stderr, flush=True)

    try:
        state = up(_devnet_dir(args), args.nodes, faults=dict(args.fault or []), progress=progress, anvil=args.anvil, referee=args.referee)
    except DevnetError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(state.to_json(), end="")
        return EXIT_OK
    print(f"anvil     {state.rpc_url} (pid {state.anvil.pid}, chain id {state.chain_id})")
    print(f"market    {state.job_market}")
    print(f"registry  {state.node_registry}")
    if state.step_referee:
        print(f"disputes  {state.dispute_game} (referee: step referee {state.step_referee}, committee {state.committee} its fallback)")
    else:
        print(f"disputes  {state.dispute_game} (referee: committee {state.committee})")
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


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Adds this group's subcommands to the `vxla` parser."""
    submit = commands.add_parser(
        "submit",
        help="submit a job to a node",
        description="Upload the inputs to a node, queue MODULE.hlo on them and print the job id; "
        "with --wait, wait for it and print the output digests (each output checked against "
        "the signed trace's digest).",
    )
    add_program_arguments(submit, inputs=True)
    submit.add_argument("--node", required=True, type=node_url_arg, metavar="URL", help="the node's URL, e.g. http://127.0.0.1:8700 (or 127.0.0.1:8700)")
    submit.add_argument("--redundancy", type=positive_int, default=1, metavar="K", help="nodes that must run the job (above 1: post it on chain, with --devnet)")
    submit.add_argument("--devnet", metavar="DIR", help="post the job on the devnet in DIR (its market and submitter account); --wait follows it to finalization")
    submit.add_argument(
        "--challenge-window", type=positive_int, default=None, metavar="S",
        help="with --devnet: seconds after the reveal phase in which the results may be challenged, before the job "
        "settles (default: 60; at least the market's minimum)",
    )  # fmt: skip
    submit.add_argument("--wait", action="store_true", help="wait until the job is done and print its outputs")
    submit.add_argument("--timeout", type=float, default=None, metavar="S", help="with --wait: give up after S seconds")
    submit.add_argument("--out", metavar="OUT.npz", help="with --wait: write the outputs as out0, out1, ...")
    submit.add_argument("--token", metavar="TOKEN", help="the node's bearer token, when it requires one (default: $VXLA_TOKEN)")
    submit.add_argument("--json", action="store_true", help="print one JSON object")
    submit.set_defaults(handler=cmd_submit)

    devnet_commands = command_group(commands, "devnet", help="a local chain with N nodes", description="A local devnet: anvil, the contracts and N registered nodes, as child processes.")
    devnet_up = devnet_commands.add_parser("up", help="start anvil, deploy, register and start N nodes", description="Start anvil on 127.0.0.1, deploy the contracts, and start N nodes (own keys, data dirs, ports, staked accounts); writes DIR/state.json.")
    devnet_up.add_argument("--nodes", type=positive_int, default=3, metavar="N", help="number of nodes (default 3)")
    devnet_up.add_argument("--fault", type=_fault_spec, action="append", metavar="NODE=INSTRUCTION[:BIT]", help="test/demo only: start node NODE with fault injection (flips BIT of INSTRUCTION's output)")
    devnet_up.add_argument(
        "--referee", choices=REFEREES, default=REFEREES[0],
        help="who decides a dispute's instruction: the step referee, the contract evaluating one scalar operation, with the committee for what it cannot evaluate (default), or the committee alone",
    )  # fmt: skip
    devnet_up.add_argument("--anvil", metavar="PATH", help="the anvil executable (default: $VXLA_ANVIL, else anvil on PATH, else a checkout's contracts/node_modules copy)")
    devnet_up.add_argument("--json", action="store_true", help="print the state as JSON")
    devnet_status = devnet_commands.add_parser("status", help="show anvil and each node", description="Show anvil and each node: process, healthz, readyz, stake.")
    devnet_status.add_argument("--json", action="store_true", help="print one JSON object")
    devnet_down = devnet_commands.add_parser("down", help="stop what `devnet up` started", description="Stop exactly the processes in DIR/state.json (each checked to still be ours) and nothing else.")
    for sub, handler in ((devnet_up, cmd_devnet_up), (devnet_status, cmd_devnet_status), (devnet_down, cmd_devnet_down)):
        sub.add_argument("--dir", metavar="DIR", help="devnet directory (default .devnet)")
        sub.set_defaults(handler=handler)
