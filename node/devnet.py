"""A local devnet: anvil on 127.0.0.1, the contracts deployed, and N registered nodes, each a
`vxla node run` child process with its own keys, data directory, port and chain account.

anvil mines a block every second and every transaction at once (`ANVIL_MINING`), so the
chain's clock moves as a real chain's does.

Layout under the devnet directory (default `.devnet/`):
- `state.json`: what `up` started (pids with the command line each was started with, ports,
  addresses, the deployment); `status` and `down` read it.
- `anvil.log`, and per node `nodeI/` with `keys/`, `data/`, `node.toml` and `node.log`.

Accounts: anvil's funded dev accounts, unlocked by anvil: 0 deploys, 1 submits, 2.. are the
nodes (each stakes `NODE_STAKE_WEI` at registration). `down` stops exactly the processes in
the state file, and only after checking that each pid still runs the command line `up` gave
it (a pid reused by another process is left alone).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from node.devnet_state import REFEREES, STATE_FILE, DevnetError, DevnetState, NodeInfo, ProcessInfo

# The directory the `node` package is imported from (a checkout, or site-packages when
# installed): the devnet's processes run there, so `python -m node.cli` in a node process
# imports this same code, an uninstalled checkout's included.
ROOT = Path(__file__).resolve().parents[1]
# Where anvil comes from, in this order (find_anvil): `vxla devnet up --anvil PATH`, this
# variable, `anvil` on PATH, and in a checkout the pinned npm build of
# contracts/package-lock.json that `make contracts` installs.
ANVIL_ENV = "VXLA_ANVIL"
CHECKOUT_ANVIL = Path("contracts/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")
ETHER = 10**18
MIN_STAKE_WEI = ETHER
NODE_STAKE_WEI = 2 * ETHER
SLASH_WEI = ETHER // 10
UNBONDING_DELAY_S = 60
MAX_NODES = 8  # anvil funds 10 accounts: a deployer, a submitter and the nodes
# The dispute game's windows on a devnet (docs/disputes.md): short, so a job settles seconds
# after its reveals, and a dispute plays out in under a minute. Its jobs' challenge window
# is the submitter's (`vxla submit --challenge-window`, default 60 s), at least this minimum.
MIN_CHALLENGE_WINDOW_S = 5
MOVE_WINDOW_S = 20
VOTE_WINDOW_S = 20
MAX_COMMITTEE = 3
CHALLENGE_BOND_WEI = ETHER // 10
MEMBER_STAKE_WEI = ETHER // 10
DEMO_CHALLENGE_WINDOW_S = 10  # the demo's jobs: settled 10 s after their last reveal
# The optimistic story: the honest nodes claim only jobs paying at least the SDK's default
# reward, so the optimistic job, paying a tenth of it, is the faulty node's alone; they still
# verify it. Its window leaves them time to re-execute it and challenge.
DEMO_OPTIMISTIC_WINDOW_S = 10


def game_terms(nodes: int):  # -> node.chain.GameTerms (imported lazily)
    """The devnet's dispute game terms for `nodes` nodes: the short windows above and a
    committee of up to MAX_COMMITTEE members, as many as remain of the nodes once a dispute's
    two parties are left out (at least 1)."""
    from node.chain import GameTerms

    return GameTerms(
        min_challenge_window_s=MIN_CHALLENGE_WINDOW_S, challenge_bond_wei=CHALLENGE_BOND_WEI, move_window_s=MOVE_WINDOW_S,
        committee_size=max(1, min(MAX_COMMITTEE, nodes - 2)), member_stake_wei=MEMBER_STAKE_WEI, vote_window_s=VOTE_WINDOW_S,
    )  # fmt: skip
# A block every second even with no traffic, as a chain makes blocks, and a transaction
# mined at once (anvil's mixed mining). With transactions alone an idle devnet's clock stands
# still between them: the commit deadline of a job that not every slot committed to never
# passes on chain, and reveals wait for the next transaction, whoever sends it.
ANVIL_MINING = ("--block-time", "1", "--mixed-mining")


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_ours(process: ProcessInfo) -> bool:
    """True when `process.pid` is alive and runs the command line we started it with."""
    try:
        raw = Path(f"/proc/{process.pid}/cmdline").read_bytes()
    except OSError:
        return False
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a] == process.argv


def find_anvil(explicit: str | Path | None = None, environ: dict[str, str] | None = None) -> Path:
    """The anvil executable: `explicit` (the --anvil option), else $VXLA_ANVIL, else `anvil`
    on PATH, else the checkout's contracts/node_modules copy. A path given explicitly or by
    the variable must be an executable file: a typo is an error, not a fall-through to
    another anvil. DevnetError naming the three ways when none is found."""
    environ = os.environ if environ is None else environ
    for given, source in ((explicit, "--anvil"), (environ.get(ANVIL_ENV) or None, f"${ANVIL_ENV}")):
        if given is None:
            continue
        # Absolute: anvil runs from ROOT, where a relative path would name another file.
        path = Path(given).expanduser().absolute()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise DevnetError(f"{source} {given}: not an executable file")
        return path
    on_path = shutil.which("anvil", path=environ.get("PATH"))
    if on_path is not None:
        return Path(on_path).absolute()
    checkout = ROOT / CHECKOUT_ANVIL
    if checkout.is_file():
        return checkout
    raise DevnetError(
        f"anvil not found: pass --anvil PATH (or set ${ANVIL_ENV}), put Foundry's anvil on PATH, "
        f"or in a checkout run `make contracts` (npm ci in contracts/, which installs {CHECKOUT_ANVIL})"
    )


def install_checkout_anvil(progress: Callable[[str], None], environ: dict[str, str] | None = None) -> None:
    """In a checkout without contracts/node_modules (a fresh clone), installs the pinned
    anvil of contracts/package-lock.json with `npm ci`, as `make contracts` does, so that
    `vxla devnet up` works from a fresh clone as the README says. Does nothing outside a
    checkout, or when the checkout's anvil is there. DevnetError naming what is missing when
    npm is not installed or the install fails (its output's last lines)."""
    environ = dict(os.environ if environ is None else environ)
    contracts = ROOT / "contracts"
    if (ROOT / CHECKOUT_ANVIL).is_file() or not (contracts / "package-lock.json").is_file():
        return
    npm = shutil.which("npm", path=environ.get("PATH"))
    if npm is None:
        raise DevnetError(
            f"anvil not found, and npm is not installed to install the checkout's pinned anvil "
            f"({CHECKOUT_ANVIL}): install Node.js with npm, or pass --anvil PATH"
        )
    progress("installing the pinned anvil (npm ci in contracts/, once)")
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=contracts, env=environ,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not (ROOT / CHECKOUT_ANVIL).is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise DevnetError(f"npm ci in {contracts} failed (exit {done.returncode}); `make contracts` shows why:\n{tail}")
    # The stamp `make contracts` checks, so make does not install the same lock file again.
    (contracts / "node_modules" / ".installed").touch()


def _wait_http(url: str, proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.is_file() else ""
            raise DevnetError(f"{proc.args[0]} exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise DevnetError(f"{url} did not answer within {timeout:.0f} s (log: {log_path})")


def _spawn(argv: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], ProcessInfo]:
    with log_path.open("ab") as log:
        # A session of its own: a Ctrl-C in the caller's terminal does not reach the devnet;
        # `down` stops it.
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True
        )
    return proc, ProcessInfo(proc.pid, argv)


def _check_node_directories(directory: Path, nodes: int) -> None:
    """Before anything starts: a node directory left by an earlier devnet (its chain is gone)
    may be replaced; anything else in the way is an error, and nothing is written or deleted."""
    for index in range(nodes):
        node_dir = directory / f"node{index}"
        if node_dir.exists() and not _is_devnet_node_directory(node_dir):
            raise DevnetError(f"{node_dir} exists and is not a devnet node directory; choose another --dir")


def _is_devnet_node_directory(node_dir: Path) -> bool:
    config = node_dir / "node.toml"
    return config.is_file() and config.read_text(encoding="utf-8").startswith("# devnet node ")


def _node_toml(index: int, port: int, node_dir: Path, state: DevnetState, account: str, fault: str, min_reward_wei: int = 1) -> str:
    instruction, _, bit = fault.partition(":")
    return "\n".join(
        [
            f"# devnet node {index}, written by `vxla devnet up`",
            "[node]",
            'host = "127.0.0.1"',
            f"port = {port}",
            f"data_dir = {json.dumps(str(node_dir / 'data'))}",
            f"key_file = {json.dumps(str(node_dir / 'keys' / 'node.key'))}",
            f"fault_instruction = {json.dumps(instruction)}",
            f"fault_bit = {int(bit or 0)}",
            "[chain]",
            f"rpc_url = {json.dumps(state.rpc_url)}",
            f'job_market = "{state.job_market}"',
            f'node_registry = "{state.node_registry}"',
            "confirmations = 0",
            f'account = "{account}"',
            f"start_block = {state.deploy_block}",
            "poll_interval_s = 0.25",
            f"min_reward_wei = {min_reward_wei}",
            "allow_private_peers = true  # every devnet node is on 127.0.0.1",
            "",
        ]
    )


def up(
    directory: Path, nodes: int, *, faults: dict[int, str] | None = None, timeout: float = 90.0,
    progress: Callable[[str], None] | None = None, anvil: str | Path | None = None,
    min_rewards: dict[int, int] | None = None, referee: str = "steps",
) -> DevnetState:  # fmt: skip
    """Start anvil, deploy, and start `nodes` registered nodes (see the module docstring).
    `referee`: "steps" (the step referee, the committee its fallback) or "committee" (the
    committee alone) decides a dispute's instruction.
    `faults` maps a node index to "INSTRUCTION:BIT" (fault injection: test/demo only);
    `min_rewards` a node index to the smallest reward (wei) it claims a slot for.
    `progress` hears each step as it starts, in words. `anvil`: the executable to run
    (default: found by `find_anvil`)."""
    tell = progress or (lambda step: None)
    from attest import init_key_files
    from node.chain import ChainClient, deploy

    if referee not in REFEREES:
        raise DevnetError(f"--referee must be one of {', '.join(REFEREES)}, got {referee!r}")
    if not 1 <= nodes <= MAX_NODES:
        raise DevnetError(f"--nodes must be in 1..{MAX_NODES}, got {nodes}")
    faults = faults or {}
    for index in faults:
        if not 0 <= index < nodes:
            raise DevnetError(f"fault on node {index}: there are nodes 0..{nodes - 1}")
    try:
        anvil_path = find_anvil(anvil)
    except DevnetError:
        if anvil is not None or os.environ.get(ANVIL_ENV):
            raise  # a named anvil that is not there is the user's to fix
        install_checkout_anvil(tell)  # a fresh clone: what `make contracts` would install
        anvil_path = find_anvil(anvil)
    directory = directory.resolve()
    _check_node_directories(directory, nodes)
    if (directory / STATE_FILE).is_file():
        previous = DevnetState.load(directory)
        if any(is_ours(p) for p in [previous.anvil] + [n.process for n in previous.nodes]):
            raise DevnetError(f"a devnet is already up in {directory} (`vxla devnet down` first)")
        (directory / STATE_FILE).unlink()
    directory.mkdir(parents=True, exist_ok=True)
    started: list[ProcessInfo] = []
    try:
        port = free_port()
        tell(f"starting anvil on 127.0.0.1:{port}")
        argv = [str(anvil_path), "--port", str(port), "--host", "127.0.0.1", "--silent", "--chain-id", "31337", *ANVIL_MINING]
        anvil_proc, anvil_info = _spawn(argv, directory / "anvil.log")
        started.append(anvil_info)
        rpc_url = f"http://127.0.0.1:{port}"
        from web3 import HTTPProvider, Web3

        w3 = Web3(HTTPProvider(rpc_url, request_kwargs={"timeout": 30}))
        deadline = time.monotonic() + timeout
        while not w3.is_connected():
            if anvil_proc.poll() is not None or time.monotonic() > deadline:
                raise DevnetError(f"anvil did not start (log: {directory / 'anvil.log'})")
            time.sleep(0.1)
        client = ChainClient(w3)
        deployer, submitter, *accounts = client.accounts()[: 2 + nodes]
        steps = referee == "steps"
        tell(f"deploying NodeRegistry, JobMarket, DisputeGame, Committee{', ScalarMachine and StepReferee' if steps else ''}")
        d = deploy(
            client, deployer, min_stake_wei=MIN_STAKE_WEI, unbonding_delay_s=UNBONDING_DELAY_S, slash_amount_wei=SLASH_WEI,
            terms=game_terms(nodes), step_referee=steps,
        )  # fmt: skip
        state = DevnetState(
            str(directory), rpc_url, client.chain_id, d.market.address, d.registry.address, d.block,
            deployer, submitter, anvil_info, dispute_game=d.game.address, committee=d.committee.address,
            step_referee=d.step_referee.address if d.step_referee is not None else "",
        )  # fmt: skip
        procs = []
        for index, account in enumerate(accounts):
            node_dir = directory / f"node{index}"
            if node_dir.exists():  # an earlier devnet's (checked above)
                shutil.rmtree(node_dir)
            tell(f"node{index}: keys, stake, start")
            keys = init_key_files(node_dir / "keys")
            node_port = free_port()
            url = f"http://127.0.0.1:{node_port}"
            config = node_dir / "node.toml"
            fault = faults.get(index, "")
            min_reward = (min_rewards or {}).get(index, 1)
            config.write_text(_node_toml(index, node_port, node_dir, state, account, fault, min_reward), encoding="utf-8")
            d.registry.register(account, bytes.fromhex(keys.key_id), url, NODE_STAKE_WEI)
            argv = [sys.executable, "-m", "node.cli", "node", "run", "--config", str(config)]
            proc, info = _spawn(argv, node_dir / "node.log")
            started.append(info)
            procs.append((proc, node_dir / "node.log", url))
            state.nodes.append(
                NodeInfo(index, url, node_port, account, keys.key_id, str(node_dir), str(config), info, fault)
            )
        (directory / STATE_FILE).write_text(state.to_json(), encoding="utf-8")
        for index, (proc, log_path, url) in enumerate(procs):
            tell(f"waiting for node{index} to be ready ({url}/readyz)")
            _wait_http(f"{url}/readyz", proc, log_path, timeout)
        return state
    except BaseException:
        # Leave nothing running behind a failed `up`.
        for info in started:
            _stop(info)
        (directory / STATE_FILE).unlink(missing_ok=True)
        raise


def _stop(process: ProcessInfo, timeout: float = 15.0) -> bool:
    """SIGTERM, then SIGKILL after `timeout`, only if the pid is still ours. True if stopped."""
    if not is_ours(process):
        return False
    os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(process.pid)
        if not is_ours(process):
            return True
        time.sleep(0.1)
    if is_ours(process):
        os.kill(process.pid, signal.SIGKILL)
    _reap(process.pid)
    return True


def _reap(pid: int) -> None:
    # Our own child (up and down in one process, as in tests): collect it so it is gone.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def down(directory: Path) -> list[str]:
    """Stop the nodes, then anvil, from the state file; returns what was stopped."""
    directory = directory.resolve()
    state = DevnetState.load(directory)
    stopped = []
    for node in state.nodes:
        if _stop(node.process):
            stopped.append(f"node{node.index} (pid {node.process.pid})")
    if _stop(state.anvil):
        stopped.append(f"anvil (pid {state.anvil.pid})")
    (directory / STATE_FILE).unlink()
    return stopped


def status(directory: Path) -> dict[str, Any]:
    """Anvil (alive, block, jobs posted) and each node (alive, healthz, readyz, stake) as a
    JSON-ready dict."""
    from web3 import HTTPProvider, Web3

    from node.chain import ChainClient, JobMarket, NodeRegistry

    state = DevnetState.load(directory.resolve())
    report: dict[str, Any] = {"directory": state.directory, "rpc_url": state.rpc_url, "job_market": state.job_market,
                              "node_registry": state.node_registry, "anvil": {"pid": state.anvil.pid,
                              "running": is_ours(state.anvil)}, "nodes": []}  # fmt: skip
    registry = None
    if report["anvil"]["running"]:
        client = ChainClient(Web3(HTTPProvider(state.rpc_url, request_kwargs={"timeout": 10})))
        report["anvil"]["block"] = client.block_number()
        report["anvil"]["jobs_posted"] = JobMarket(client, state.job_market).job_count()
        registry = NodeRegistry(client, state.node_registry)
    for node in state.nodes:
        entry: dict[str, Any] = {"index": node.index, "url": node.url, "account": node.account, "pid": node.process.pid,
                                 "running": is_ours(node.process), "fault": node.fault}  # fmt: skip
        for check in ("healthz", "readyz"):
            try:
                entry[check] = httpx.get(f"{node.url}/{check}", timeout=5).status_code == 200
            except httpx.HTTPError:
                entry[check] = False
        if registry is not None:
            entry["stake_wei"] = registry.get_node(node.account).stake
        report["nodes"].append(entry)
    return report


# -- the demo (`make demo`) ----------------------------------------------------------------


def pick_fault(module_text: str, input_paths: list[Path]) -> str:
    """A fault ("INSTRUCTION:BIT") for the demo's faulty node: an instruction in the middle of
    the schedule and a bit whose flip changes the outputs, found by running the module here."""
    import numpy as np

    from attest.digests import tensor_digest
    from compiler.api import Fault, compile_program, load_config, load_program
    from node.tracing.statement import checked_inputs

    program = load_program(module_text)
    executable = compile_program(program, load_config())
    arrays = checked_inputs(program, [np.load(p, allow_pickle=False) for p in input_paths])
    honest = [tensor_digest(o) for o in executable.run_traced(*arrays).outputs]
    plan = executable.plan
    points = [p for p in plan.trace_points if plan.buffers[p.buffers[0]].kind == "arena"]
    for point in points[len(points) // 2 :] + points[: len(points) // 2]:
        for bit in (30, 22, 3, 0):
            if bit >= 8 * plan.buffers[point.buffers[0]].nbytes:
                continue
            outputs = executable.run_traced(*arrays, fault=Fault(point.name, bit)).outputs
            if [tensor_digest(o) for o in outputs] != honest:
                return f"{point.name}:{bit}"
    raise DevnetError("no instruction whose bit flip changes the outputs")


def _demo_job(state: DevnetState, module_path: Path, input_paths: list[Path], say: Any) -> int:
    """Submit through the SDK with redundancy = the node count, wait, and print the outcome."""
    import numpy as np
    from web3 import HTTPProvider, Web3

    from attest import first_divergence
    from attest.statement import Statement
    from node.chain import ChainClient, JobMarket, NodeRegistry, fetch_events
    from node.sdk import ChainSubmitter, Client
    from node.tracing.verify import parse_envelope

    client = ChainClient(Web3(HTTPProvider(state.rpc_url, request_kwargs={"timeout": 30})))
    market = JobMarket(client, state.job_market)
    registry = NodeRegistry(client, state.node_registry)
    stakes = {n.account: registry.get_node(n.account).stake for n in state.nodes}
    k = len(state.nodes)
    sdk = Client(state.nodes[0].url, chain=ChainSubmitter(market, state.submitter, challenge_window_s=DEMO_CHALLENGE_WINDOW_S))
    job = sdk.submit(module_path, input_paths, redundancy=k)
    say(
        f"posted chain job {job.id} (k={k}, graph commitment computed here, results open to challenge for "
        f"{DEMO_CHALLENGE_WINDOW_S} s after the reveals) from {state.submitter}; module and inputs uploaded to node0"
    )
    job.wait(timeout=180, poll_seconds=0.25, progress=lambda j: say(f"  job {j.id}: {j.state}"))
    for index, array in enumerate(job.outputs()):
        flat = np.asarray(array, dtype=np.float64).ravel()
        preview = ", ".join(f"{v:.5g}" for v in flat[:6])
        say(f"output {index}: {array.dtype} {list(array.shape)} [{preview}{', ...' if flat.size > 6 else ''}]")
    statements = {}
    say("the nodes' results and signed traces:")
    for node in state.nodes:
        theirs = Client(node.url).job(job.id)
        local = theirs.info["local"] or {}
        envelope = theirs.trace()
        statements[node.index] = Statement.from_json_bytes(parse_envelope(envelope).payload)
        fault = f"   <- FAULT INJECTION {node.fault}" if node.fault else ""
        say(f"  node{node.index} result {local.get('result_digest', '?')[:16]}  trace {local.get('envelope_digest', '?')[:16]}{fault}")
    for node in state.nodes[1:]:
        divergence = first_divergence(statements[0], statements[node.index])
        say(f"  node0 vs node{node.index}: {divergence.summary()}")
    final = market.get_job(int(job.id))
    say(f"on chain: phase {final.phase.name}, accepted {final.accepted}, result {final.result.hex()}")
    rewards: dict[str, int] = {}
    for event in fetch_events(client, market.contract, state.deploy_block, names=("Rewarded",)):
        if int(event.args["jobId"]) == int(job.id):
            rewards[str(event.args["node"])] = rewards.get(str(event.args["node"]), 0) + int(event.args["amount"])
    for slot in market.get_slots(int(job.id)):
        node = next(n for n in state.nodes if n.account == slot.node)
        now = registry.get_node(slot.node).stake
        change = now - stakes[slot.node]
        verdict = "agreed" if slot.result_digest == final.result else "REFUTED by a dispute" if slot.refuted else "OUTVOTED"
        reward = rewards.get(slot.node, 0) / ETHER
        say(f"  node{node.index} {slot.node}: {verdict}, reward {reward:g} ETH, stake {now / ETHER:g} ETH ({change / ETHER:+g})")
    names = {n.account: f"node{n.index}" for n in state.nodes}
    for d in Client(state.nodes[0].url)._json("GET", f"/v1/chain/jobs/{job.id}").get("disputes", []):
        where = "" if d["instruction"] is None else f" at instruction #{d['instruction']} {d.get('instruction_name') or ''}"
        from node.chain.step_play import step_case_words

        words = step_case_words(d.get("step_case"))
        where += "" if words is None else f" ({words})"
        say(
            f"  dispute {d['dispute_id']}: {names.get(d['challenger'], d['challenger'])} challenged "
            f"{names.get(d['defender'], d['defender'])}; {d['moves']} bisection moves{where}; "
            f"{d['verdict'] or d['stage']}, {names.get(d['winner'], d['winner'] or 'nobody')} won"
        )
    report = Client(state.nodes[0].url)._json("GET", f"/v1/chain/jobs/{job.id}/divergence")
    deadline = time.monotonic() + 20
    while any(n.fault for n in state.nodes) and not report["divergences"] and time.monotonic() < deadline:
        time.sleep(0.25)
        report = Client(state.nodes[0].url)._json("GET", f"/v1/chain/jobs/{job.id}/divergence")
    finalized_at = next(
        e.block_number
        for e in fetch_events(client, market.contract, state.deploy_block, names=("Finalized",))
        if int(e.args["jobId"]) == int(job.id)
    )
    for entry in report["divergences"]:
        say(
            f"node0's divergence report: {entry['node']} first differs at instruction "
            f"#{entry['instruction_index']} {entry['instruction_name']} ({entry['instruction_opcode']}); "
            f"recorded at block {report['recorded_block']}, the job finalized at block {finalized_at}"
        )
    if not report["divergences"]:
        say("node0's divergence report: no node diverged")
    return int(job.id)


def _optimistic_demo(state: DevnetState, module_path: Path, input_paths: list[Path], say: Any) -> int:
    """An optimistic job (k = 1) that only the faulty node claims; the honest nodes, as
    verifiers, re-execute it, challenge, play the dispute game and sit on its committee."""
    from web3 import HTTPProvider, Web3

    from node.chain import ChainClient, JobMarket, NodeRegistry, Phase, fetch_events
    from node.sdk import ChainSubmitter, Client

    client = ChainClient(Web3(HTTPProvider(state.rpc_url, request_kwargs={"timeout": 30})))
    market = JobMarket(client, state.job_market)
    registry = NodeRegistry(client, state.node_registry)
    stakes = {n.account: registry.get_node(n.account).stake for n in state.nodes}
    names = {n.account: f"node{n.index}" for n in state.nodes}
    faulty = next(n for n in state.nodes if n.fault)
    reward = ChainSubmitter.reward_wei // 10
    submitter = ChainSubmitter(market, state.submitter, reward_wei=reward, challenge_window_s=DEMO_OPTIMISTIC_WINDOW_S)
    job = Client(faulty.url, chain=submitter).submit(module_path, input_paths, redundancy=1)
    job_id = int(job.id)
    say(
        f"posted optimistic chain job {job_id} (k=1, reward {reward / ETHER:g} ETH: only "
        f"node{faulty.index} takes jobs that small; open to challenge for {DEMO_OPTIMISTIC_WINDOW_S} s after its reveal)"
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 240
    posted = time.monotonic()
    first_dispute: float | None = None
    while True:
        chain_job = market.get_job(job_id)
        lines = [f"slot taken by {names.get(s.node, s.node)}" + (", revealed" if s.revealed else "") for s in market.get_slots(job_id)]
        info = Client(state.nodes[0].url)._json("GET", f"/v1/chain/jobs/{job_id}")
        for d in info.get("disputes", []):
            where = "" if d["instruction"] is None else f", at instruction #{d['instruction']} {d.get('instruction_name') or ''}"
            outcome = "" if d["verdict"] is None else f": {d['verdict']}, {names.get(d['winner'], d['winner'])} wins"
            from node.chain.step_play import step_case_words

            words = step_case_words(d.get("step_case"))
            case = "" if words is None else f" ({words})"
            lines.append(
                f"dispute {d['dispute_id']}: {names.get(d['challenger'], d['challenger'])} challenges "
                f"{names.get(d['defender'], d['defender'])}, {d['stage']}, {d['moves']} bisection moves{where}{case}{outcome}"
            )
        if info.get("disputes") and first_dispute is None:
            first_dispute = time.monotonic()
        for line in lines:
            if line not in seen:
                seen.add(line)
                say(f"  {line}")
        if info.get("disputes") and all(d["verdict"] for d in info["disputes"]) and "settled" not in seen:
            seen.add("settled")
            assert first_dispute is not None
            say(
                f"  every dispute settled {time.monotonic() - first_dispute:.1f} s after the first challenge was seen "
                f"({first_dispute - posted:.1f} s after posting)"
            )
        if chain_job.phase == Phase.FINALIZED:
            break
        if time.monotonic() > deadline:
            raise DevnetError(f"the optimistic job {job_id} did not settle in 240 s")
        time.sleep(0.5)
    say(f"on chain: accepted {chain_job.accepted} (the only slot was refuted: the submitter gets the reward back)")
    for event in fetch_events(client, market.contract, state.deploy_block, names=("Refuted",)):
        if int(event.args["jobId"]) == job_id:
            say(
                f"  Refuted: {names[event.args['node']]}'s slot; its {int(event.args['amount']) / ETHER:g} ETH stake "
                f"credited to {names.get(event.args['challenger'], event.args['challenger'])}"
            )
    for node in state.nodes:
        now = registry.get_node(node.account).stake
        say(f"  node{node.index}: stake {now / ETHER:g} ETH ({(now - stakes[node.account]) / ETHER:+g})")
    return job_id


def demo(directory: Path, module_path: Path, input_paths: list[Path]) -> int:
    """The `make demo` story: an honest k=3 job, the same job with a faulty node, then an
    optimistic job (k = 1) that the faulty node runs alone and the honest ones refute."""

    def say(text: str) -> None:
        print(text, flush=True)

    for title, faults in (("honest devnet", {}), ("one faulty node", None)):
        if faults is None:
            say("\n== picking an instruction to corrupt on node2 (a bit flip that changes the outputs)")
            fault = pick_fault(module_path.read_text(encoding="utf-8"), input_paths)
            say(f"fault: {fault}")
            faults = {2: fault}
        say(f"\n== devnet up ({title}): anvil, contracts, 3 staked nodes")
        # With a faulty node, the honest ones take only jobs paying the SDK's default reward or
        # more, so that the optimistic job below is the faulty node's alone.
        from node.sdk import ChainSubmitter

        min_rewards = {} if not faults else {i: ChainSubmitter.reward_wei for i in range(3) if i not in faults}
        state = up(directory, 3, faults=faults, min_rewards=min_rewards)
        try:
            for node in state.nodes:
                say(f"node{node.index} {node.url} account {node.account}" + (f"  FAULT {node.fault}" if node.fault else ""))
            say(f"\n== submit {module_path.parent.name} with redundancy 3 through the SDK")
            _demo_job(state, module_path, input_paths, say)
            if any(n.fault for n in state.nodes):
                say("\n== an optimistic job (redundancy 1): the faulty node runs it alone, the honest nodes verify it")
                _optimistic_demo(state, module_path, input_paths, say)
        finally:
            say("\n== devnet down: " + ", ".join(down(directory)))
    return 0


if __name__ == "__main__":
    # python -m node.devnet demo MODULE.hlo IN.npy ... (what `make demo` runs)
    if len(sys.argv) < 3 or sys.argv[1] != "demo":
        print("usage: python -m node.devnet demo MODULE.hlo [IN.npy ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(demo(Path(".devnet/demo"), Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]]))
