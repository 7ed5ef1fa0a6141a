"""`vxla submit` and `vxla devnet`: send jobs to a node (and to the chain), and run a local
chain with N nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from node.cli.common import download_bar, node_session, output_records, read_hlo_text
from node.cli.usage import EXIT_DIFFERENT, EXIT_OK, UsageError
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
                with download_bar("downloading the outputs") as bar:
                    outputs = job.outputs(progress=None if args.json else bar)
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


def _on_devnet(args: argparse.Namespace, action: str, **options: Any) -> Any:
    """node.devnet's `action` (up, status, down) on the --dir devnet; what it refuses is a
    usage error. node.devnet is imported here: the other commands do without it."""
    from node import devnet

    try:
        return getattr(devnet, action)(Path(args.dir) if args.dir else Path(".devnet"), **options)
    except devnet.DevnetError as exc:
        raise UsageError(str(exc)) from None


def cmd_devnet_up(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def progress(step: str) -> None:
        print(f"[{time.monotonic() - started:4.1f} s] {step}", file=sys.stderr, flush=True)

    state = _on_devnet(args, "up", nodes=args.nodes, faults=dict(args.fault or []), progress=progress, anvil=args.anvil, referee=args.referee)
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
    report = _on_devnet(args, "status")
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
    stopped = _on_devnet(args, "down")
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return EXIT_OK
