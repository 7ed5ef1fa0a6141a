"""The committed artifacts are what the pinned compiler makes from the committed sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from node.chain import load_artifact

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
SOURCES = (
    "Commitments",
    "Committee",
    "DisputeGame",
    "JobMarket",
    "NodeRegistry",
    "ScalarEval",
    "ScalarMachine",
    "StepReferee",
)  # src/<name>.sol
# One artifact per contract, the interface (in DisputeGame.sol) and the proof library (in
# StepReferee.sol) too.
NAMES = (*SOURCES, "IReferee", "TensorProofs")


def test_rebuild_gives_identical_bytes(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node.js is needed to rebuild the contracts (see contracts/README.md)"
    assert (CONTRACTS / "node_modules" / "solc").is_dir(), "run `make contracts` (npm ci) first"
    subprocess.run(
        [node, str(CONTRACTS / "build.js"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    rebuilt = sorted(p.name for p in (tmp_path / "artifacts").iterdir())
    committed = sorted(p.name for p in (CONTRACTS / "artifacts").iterdir())
    assert rebuilt == committed == sorted(f"{n}.json" for n in NAMES)
    for name in committed:
        assert (tmp_path / "artifacts" / name).read_bytes() == (
            CONTRACTS / "artifacts" / name
        ).read_bytes(), name
    assert (tmp_path / "standard-input.json").read_bytes() == (
        CONTRACTS / "standard-input.json"
    ).read_bytes()


def test_build_is_pinned() -> None:
    """One exact solc in package.json and the lock; no metadata hash in the bytecode."""
    package = json.loads((CONTRACTS / "package.json").read_text())
    lock = json.loads((CONTRACTS / "package-lock.json").read_text())
    solc = package["devDependencies"]["solc"]
    assert solc[0].isdigit() and all(c.isdigit() or c == "." for c in solc)  # no ranges
    assert lock["packages"]["node_modules/solc"]["version"] == solc
    anvil = "@foundry-rs/anvil-linux-amd64"
    assert package["devDependencies"][anvil] == "1.7.1"
    assert lock["packages"][f"node_modules/{anvil}"]["version"] == "1.7.1"
    settings = json.loads((CONTRACTS / "standard-input.json").read_text())["settings"]
    assert settings["metadata"] == {"bytecodeHash": "none", "appendCBOR": False}
    assert settings["optimizer"] == {"enabled": True, "runs": 200}
    sources = json.loads((CONTRACTS / "standard-input.json").read_text())["sources"]
    assert sorted(sources) == [f"src/{name}.sol" for name in SOURCES]
    for name in SOURCES:
        assert (
            sources[f"src/{name}.sol"]["content"] == (CONTRACTS / "src" / f"{name}.sol").read_text()
        )
    referee = json.loads((CONTRACTS / "artifacts" / "IReferee.json").read_text())
    assert referee["sourceName"] == "src/DisputeGame.sol"
    for name in NAMES:
        artifact = load_artifact(name)
        assert artifact.compiler.startswith(solc + "+commit.")
        # A CBOR metadata trailer would end with its 2-byte length (0x0033 and friends).
        assert not artifact.deployed_bytecode.endswith(bytes.fromhex("0033"))
        assert b"ipfs" not in artifact.deployed_bytecode


def _events(name: str) -> set[str]:
    return {i["name"] for i in load_artifact(name).abi if i["type"] == "event"}


def test_every_error_and_event_is_in_the_abi() -> None:
    assert {
        "JobPosted",
        "JobCommitment",
        "SlotClaimed",
        "Committed",
        "Revealed",
        "Refuted",
        "Finalized",
        "Slashed",
        "Refunded",
        "Rewarded",
        "Credited",
        "Withdrawn",
    } <= _events("JobMarket")
    assert {
        "MarketSet",
        "NodeRegistered",
        "EndpointUpdated",
        "StakeAdded",
        "WithdrawalRequested",
        "Withdrawn",
        "StakeLocked",
        "StakeUnlocked",
        "Slashed",
    } <= _events("NodeRegistry")
    market_errors = {i["name"] for i in load_artifact("JobMarket").abi if i["type"] == "error"}
    assert {
        "ChallengeWindowTooShort",
        "ChallengeWindowOpen",
        "DisputesOpen",
        "NotEmptyTrace",
        "NotModule",
    } <= market_errors
    assert "NotMarket" not in {
        i["name"] for i in load_artifact("NodeRegistry").abi if i["type"] == "error"
    }
    for name in SOURCES:
        source = (CONTRACTS / "src" / f"{name}.sol").read_text()
        assert "unchecked" not in source
        assert "require(" not in source and "revert(" not in source.replace("revert ", "")
