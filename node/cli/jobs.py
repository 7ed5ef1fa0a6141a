"""`vxla jobs` and `vxla job`: what a node holds and why, for the submitter who sent it.

A node's own jobs (GET /v1/jobs) show state, timings and the error of a failed one; chain
jobs (GET /v1/chain/jobs) show the node's state of each and why (skipped, expired, refused),
and `vxla job N` a chain job's phases (its challenge window among them): each slot's node,
commitment, reveal (result and op-trace root) and whether a dispute refuted it, and one line
per dispute opened on it (stage, bisection rounds, the instruction reached, who moves next and
by when, the verdict and winner).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from node.cli.common import (
    chosen_node,
    node_session,
)
from node.cli.usage import EXIT_OK


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cmd_jobs(args: argparse.Namespace) -> int:
    args.node = chosen_node(args)
    with node_session(args) as client:
        jobs = client.jobs(args.state, args.limit, chain=args.chain)
        if args.json:
            print(json.dumps({"node": args.node, "jobs": jobs}, indent=2))
            return EXIT_OK
        if not jobs:
            which = f" {args.state}" if args.state else ""
            elsewhere = "" if args.chain else _chain_jobs_hint(client, args.state)
            print(f"{args.node}: no{which} {'chain ' if args.chain else ''}jobs{elsewhere}")
            return EXIT_OK
    # One line per job, ids never cut (an id is what `vxla job` takes); the reason, when the
    # node has one, on the next line whole.
    now = time.time()
    for job in jobs:
        if args.chain:
            print(f"{job['job_id']:<8} {job['state']:<10} k={job['k']}")
            why = job["note"]
        else:
            took = f"  took {_age(job['updated_at'] - job['created_at'])}" if job["state"] in ("done", "failed") else ""
            print(f"{job['id']}  {job['state']:<8} queued {_age(now - job['created_at'])} ago{took}")
            why = job.get("error") or ""
        if why:
            print(f"    why: {why}")
    return EXIT_OK


def _chain_jobs_hint(client: Any, state: str | None) -> str:  # noqa: ANN401 - a node.sdk.Client
    """Where a node with none of its own jobs has some: the chain jobs it has seen (none when
    it follows no chain: the node answers 404)."""
    from node.sdk import RequestRefused

    try:
        seen = client.jobs(state, 1, chain=True)
    except RequestRefused:
        return ""
    return " of its own; it has seen chain jobs: vxla jobs --chain lists them" if seen else ""


def cmd_job(args: argparse.Namespace) -> int:
    args.node = chosen_node(args)
    from node.sdk import is_chain_job_id

    with node_session(args) as client:
        job = client.job(args.id)
        info: dict[str, Any] = {**job.info, "inputs": _described_inputs(job)}
    if args.json:
        print(json.dumps({"node": args.node, "job": info}, indent=2))
        return EXIT_OK
    if is_chain_job_id(args.id):
        _print_chain_job(info)
    else:
        _print_job(info)
    return EXIT_OK


def _described_inputs(job: Any) -> list[dict[str, Any]] | None:  # noqa: ANN401 - a node.sdk.Job
    """The job's inputs with the parameter each binds and its type (None when the node cannot
    say now: the listing then shows their digests alone)."""
    from node.errors import NodeError

    try:
        return job.inputs()
    except NodeError:
        return None


def _print_inputs(described: list[dict[str, Any]]) -> None:
    """One line per input: its name in the trace, the parameter it binds and its type where
    the node said them (GET .../inputs), and its digest."""
    width = max((len(item.get("parameter") or "") for item in described), default=0)
    for item in described:
        what = f"{item.get('parameter') or '':<{width}}  {item.get('type') or '':<14} " if width or item.get("type") else ""
        print(f"{item['name']:<12} {what}{item['digest']}")


def _print_job(info: dict[str, Any]) -> None:
    print(f"job          {info['id']}")
    print(f"state        {info['state']}")
    if info.get("error"):
        print(f"why          {info['error']}")
    print(f"queued       {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['created_at']))}")
    if info["state"] in ("done", "failed"):
        print(f"took         {_age(info['updated_at'] - info['created_at'])}")
    print(f"module       {info['module_digest']}")
    _print_inputs(info.get("inputs") or [{"name": f"in{n}", "digest": d} for n, d in enumerate(info.get("input_digests", []))])
    for number, digest in enumerate(info.get("output_digests", [])):
        print(f"out{number:<9} {digest}")
    if info.get("statement_digest"):
        print(f"statement    {info['statement_digest']}")


def _print_chain_job(info: dict[str, Any]) -> None:
    now = int(info.get("chain_time", 0))

    def deadline(at: int) -> str:
        return f"in {at - now} s" if at > now else f"{now - at} s ago"

    phase = info["phase"]
    if phase == "finalized":
        phase += ", accepted" if info.get("accepted") else ", no majority"
    print(f"job          {info['job_id']} (chain, contract {info['contract']})")
    print(f"phase        {phase}")
    print(f"slots        {info['claimed']} claimed, {info['committed']} committed, {info['revealed']} revealed of {info['k']}")
    print(f"commit until {deadline(int(info['commit_deadline']))}")
    print(f"reveal until {deadline(int(info['reveal_deadline']))}")
    if "challenge_deadline" in info:
        disputes = int(info.get("open_disputes", 0))
        print(f"challenges   until {deadline(int(info['challenge_deadline']))} ({info.get('challenge_window')} s window, {disputes} dispute(s) open)")
        print(f"graph        {info.get('graph_root')} ({info.get('trace_leaves')} op-trace leaves)")
    if info.get("node"):
        view = info["node"]
        print(f"this node    {view['state']}{': ' + view['note'] if view['note'] else ''}")
    if info.get("accepted"):
        print(f"result       {info['result_digest']}")
    for slot in info.get("slots", []):
        steps = "revealed" if slot["revealed"] else "committed" if slot["committed"] else "claimed"
        if slot.get("refuted"):
            steps += ", REFUTED by a dispute"
        elif slot.get("undecided"):
            steps += ", undecided by a dispute (does not count)"
        result = f" {slot['result_digest']}" if slot["revealed"] else ""
        root = f" op-trace root {slot['op_trace_root']}" if slot["revealed"] and slot.get("op_trace_root") else ""
        print(f"  {slot['node']} {steps}{result}{root}")
    _print_inputs(info.get("inputs") or [])
    listed = info.get("disputes", [])
    opened = int(info.get("dispute_count", len(listed)))
    if opened > len(listed):
        print(f"disputes     the newest {len(listed)} of {opened}:")
    for dispute in listed:
        print(dispute_line(dispute, now))


def dispute_line(d: dict[str, Any], now: int) -> str:
    """One dispute of a chain job (the node's answer, node.daemon.api.ChainDisputes), in words."""
    moves = int(d["moves"])
    parts = [
        f"dispute {d['dispute_id']}: {d['challenger']} challenges {d['defender']} (slot {d['slot']})",
        d["stage"],
        f"{moves // 2} bisection round(s) ({moves} move(s))",
    ]
    index = d.get("instruction")
    if index is not None:
        if d.get("result_leaf"):
            parts.append(f"at the result record (leaf {index}): the result digests differ")
        elif d.get("instruction_name"):
            opcode = f" ({d['instruction_opcode']})" if d.get("instruction_opcode") else ""
            parts.append(f"at instruction {index} {d['instruction_name']}{opcode}")
            if d.get("steps_uncovered"):
                parts.append(f"no element steps for it: {d['steps_uncovered']}")
            from node.chain.step_play import step_case_words  # the chain client loads only here

            words = step_case_words(d.get("step_case"))
            if words:
                parts.append(words)
        else:
            parts.append(f"at instruction {index}")
    if d.get("to_move"):
        who = "defender" if d["to_move"] == d["defender"] else "challenger"
        at = int(d["deadline"])
        when = f"deadline in {at - now} s" if at > now else f"deadline {now - at} s ago: may be timed out"
        parts.append(f"the {who} moves next ({when})")
    elif d["stage"] == "referee":
        parts.append("the referee rules")
    verdict = d.get("verdict")
    if verdict == "no-verdict":
        parts.append("no verdict" + (" (by timeout)" if d.get("by_timeout") else "") + ": bond returned, the slot does not count")
    elif verdict is not None:
        who = "defender" if d.get("winner") == d["defender"] else "challenger"
        parts.append(f"{verdict}: the {who} {d.get('winner')} won" + (" by timeout" if d.get("by_timeout") else ""))
    return "  " + ", ".join(parts)
