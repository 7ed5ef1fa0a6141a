"""The committed ABI and bytecode artifacts of the contracts (no node.js needed): package data
in node/chain/abi/ (contracts/artifacts links there, where the contracts' build writes)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

# The contracts one deployment is made of (node/chain/contracts.py deploy).
DEPLOYMENT_CONTRACTS = ("NodeRegistry", "JobMarket", "DisputeGame", "Committee", "ScalarMachine", "StepReferee")


@dataclass(frozen=True)
class Artifact:
    """One compiled contract: its ABI and its creation and runtime bytecode."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: bytes
    deployed_bytecode: bytes
    compiler: str


@cache
def load_artifact(name: str, directory: Path | None = None) -> Artifact:
    """Load the packaged artifact `abi/<name>.json` (or `<directory>/<name>.json`)."""
    if directory is not None:
        text = (directory / f"{name}.json").read_text(encoding="utf-8")
    else:
        text = resources.files("node.chain").joinpath("abi", f"{name}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return Artifact(
        name=data["contractName"],
        abi=data["abi"],
        bytecode=bytes.fromhex(data["bytecode"].removeprefix("0x")),
        deployed_bytecode=bytes.fromhex(data["deployedBytecode"].removeprefix("0x")),
        compiler=data["compiler"],
    )
