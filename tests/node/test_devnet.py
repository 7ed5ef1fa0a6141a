"""`vxla devnet up/status/down` with real processes: anvil and three `vxla node run` children
take a redundancy-3 job posted through the SDK to finalization, and one from `vxla submit
--devnet` after the chain sat idle past the old failure point; `down` stops exactly the
processes it started, and a state file naming a process that is not ours stops nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from web3 import HTTPProvider, Web3

from attest.digests import tensor_digest
from harness.fixture_data import Fixture
from node import devnet as devnet_module
from node.chain import ChainClient, JobMarket
from node.cli import main
from node.devnet import MIN_CHALLENGE_WINDOW_S, DevnetState, demo, is_ours
from node.protocol import result_digest_of
from node.sdk import ChainSubmitter, Client


def test_devnet_up_runs_a_job_status_shows_nodes_and_down_stops_only_its_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "devnet"
    # A process of someone else's, to show `down` leaves it alone.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert main(["devnet", "up", "--nodes", "3", "--dir", str(directory), "--json"]) == 0
        steps = capsys.readouterr().err  # each step as it starts, with the time so far
        for step in ("] starting anvil on 127.0.0.1:", "] deploying NodeRegistry, JobMarket, DisputeGame, Committee, ScalarMachine and StepReferee", "] node2: keys, stake, start", "] waiting for node2 to be ready"):
            assert step in steps
        state = DevnetState.load(directory)
        assert len(state.nodes) == 3 and all(is_ours(n.process) for n in state.nodes) and is_ours(state.anvil)
        assert state.step_referee and state.committee and state.step_referee != state.committee  # the default referee
        capsys.readouterr()

        assert main(["devnet", "status", "--dir", str(directory), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["anvil"]["running"]
        assert [(n["healthz"], n["readyz"], n["stake_wei"]) for n in report["nodes"]] == [(True, True, 2 * 10**18)] * 3

        # A job through the SDK with redundancy 3 finalizes on the XLA outputs' digest.
        fixture = Fixture("integer_arith")
        client = ChainClient(Web3(HTTPProvider(state.rpc_url)))
        market = JobMarket(client, state.job_market)
        sdk = Client(state.nodes[0].url, chain=ChainSubmitter(market, state.submitter))
        # The devnet's shortest challenge window: the job settles seconds after its reveals.
        job = sdk.submit(fixture.module_text, fixture.inputs(), redundancy=3, challenge_window=MIN_CHALLENGE_WINDOW_S)
        stages: list[str] = []
        job.wait(timeout=60, poll_seconds=0.2, progress=lambda current: stages.append(current.stage))
        assert stages[-1] == "done" and all(s.startswith("open: ") and s.endswith(" of 3") for s in stages[:-1]), stages
        expected = result_digest_of([tensor_digest(o) for o in fixture.xla_outputs()])
        assert market.get_job(int(job.id)).result == expected
        assert {s.result_digest for s in market.get_slots(int(job.id))} == {expected}

        # The devnet's chain makes blocks with no traffic, as a chain does (an idle chain
        # whose clock moves only with transactions would hold reveals back until the
        # reveal window had passed: tests/node/test_e2e_devnet.py runs that case).
        idle_from = client.block_number()
        time.sleep(2.5)
        assert client.block_number() >= idle_from + 2
        # The same through `vxla submit --devnet`, after the chain's clock jumped 5 minutes:
        # the deadlines come from the time the post runs at.
        client.w3.provider.make_request("evm_increaseTime", [300])
        capsys.readouterr()
        argv = ["submit", "--node", state.nodes[1].url, str(fixture.directory / "module.hlo")]
        argv += [str(p) for p in fixture.input_paths()]
        window = ["--challenge-window", str(MIN_CHALLENGE_WINDOW_S)]
        assert main(argv + ["--redundancy", "3", "--devnet", str(directory), "--wait", "--json", *window]) == 0
        submitted = json.loads(capsys.readouterr().out)
        assert submitted["job"]["phase"] == "finalized" and submitted["job"]["result_digest"] == expected.hex()
        assert [o["digest"] for o in submitted["outputs"]] == [tensor_digest(o) for o in fixture.xla_outputs()]
        assert main(["devnet", "status", "--dir", str(directory)]) == 0
        assert ", 2 job(s) posted" in capsys.readouterr().out
        # `vxla verify --devnet --job N` checks the chain's side too: the binding to this job on
        # the devnet's market and chain (from its state file), the finalized result, each slot.
        assert main(["verify", "--devnet", str(directory), "--job", job.id, "--json"]) == 0
        verified = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
        assert f"job_id {job.id}, chain_id {state.chain_id}, contract " in verified["job binding"]["message"]
        assert verified["chain result"]["ok"] and "is the one the chain finalized" in verified["chain result"]["message"]
        assert verified["slots"]["ok"] and "(3 of 3)" in verified["slots"]["message"]

        # Usage errors exit 2: a second `up` on a running devnet.
        assert main(["devnet", "up", "--nodes", "1", "--dir", str(directory)]) == 2
        assert "already up" in capsys.readouterr().err

        assert main(["devnet", "down", "--dir", str(directory)]) == 0
        assert capsys.readouterr().out.count("pid") == 4
        assert not any(is_ours(p) for p in [state.anvil] + [n.process for n in state.nodes])
        assert bystander.poll() is None
        assert not (directory / "state.json").exists()
        assert main(["devnet", "status", "--dir", str(directory)]) == 2
    finally:
        if (directory / "state.json").exists():
            main(["devnet", "down", "--dir", str(directory)])
        bystander.kill()
        bystander.wait()


def test_down_leaves_a_pid_that_is_not_ours_alone(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        state = {
            "directory": str(tmp_path), "rpc_url": "http://127.0.0.1:1", "chain_id": 31337,
            "job_market": "0x" + "1" * 40, "node_registry": "0x" + "2" * 40, "deploy_block": 1,
            "deployer": "0x" + "3" * 40, "submitter": "0x" + "4" * 40,
            # The pid is alive but runs another command line than the one recorded.
            "anvil": {"pid": other.pid, "argv": ["anvil", "--port", "1"]}, "nodes": [],
        }  # fmt: skip
        (tmp_path / "state.json").write_text(json.dumps(state))
        assert main(["devnet", "down", "--dir", str(tmp_path)]) == 0
        time.sleep(0.2)
        assert other.poll() is None
        os.kill(other.pid, 0)  # still there
    finally:
        other.kill()
        other.wait()


def test_the_demo_story_shows_agreement_then_the_faulty_node_refuted_and_named_then_an_optimistic_job_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Shorter windows than the demo's own (the honest nodes challenge within a round or two of
    # a reveal; integer_arith re-executes in well under a second): the story is the same.
    monkeypatch.setattr(devnet_module, "DEMO_CHALLENGE_WINDOW_S", 5)
    monkeypatch.setattr(devnet_module, "DEMO_OPTIMISTIC_WINDOW_S", 8)
    # The faulty node cannot answer the step referee for its wrong value and loses by the
    # clock: a shorter move window than the devnet's 20 s (the honest moves take a few).
    monkeypatch.setattr(devnet_module, "MOVE_WINDOW_S", 10)
    fixture = Fixture("integer_arith")
    assert demo(tmp_path / "demo", fixture.directory / "module.hlo", fixture.input_paths()) == 0
    out = capsys.readouterr().out
    honest, faulty = out.split("== picking an instruction")
    assert honest.count(": agreed, reward") == 3 and "OUTVOTED" not in honest
    assert honest.count("the traces agree on every compared field") == 2
    assert "no node diverged" in honest
    fault = faulty.split("fault: ", 1)[1].split("\n", 1)[0]
    instruction = fault.split(":")[0]
    faulty, optimistic = faulty.split("== an optimistic job")
    assert faulty.count(": agreed, reward") == 2
    # The honest slots disputed the faulty one: refuted (slashed once), not merely outvoted.
    assert "REFUTED by a dispute, reward 0 ETH, stake 1.9 ETH (-0.1)" in faulty
    assert "challenged node2;" in faulty and "defender-wrong, node" in faulty
    assert "first differs at instruction #" in faulty and f" {instruction} (" in faulty
    # k = 1: only the faulty node claims; an honest verifier's dispute reaches the injected
    # instruction, the step referee (the devnet's default) has its case, the contract refutes
    # the slot.
    assert "slot taken by node2, revealed" in optimistic
    settled = [line for line in optimistic.splitlines() if "at instruction #" in line and ": defender-wrong, node" in line]
    assert settled and all(f" {instruction} (step referee: done" in line for line in settled), settled
    assert "on chain: accepted False" in optimistic and "Refuted: node2's slot" in optimistic
    assert "node2: stake 1.8 ETH (-0.1)" in optimistic
    assert "node0: stake 2 ETH (+0)" in optimistic and "node1: stake 2 ETH (+0)" in optimistic
    assert out.count("== devnet down: node0") == 2
    assert not (tmp_path / "demo" / "state.json").exists()
