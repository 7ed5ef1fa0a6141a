"""The committed ABI and bytecode artifacts of contracts/artifacts (no node.js needed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# The artifacts live next to the sources that made them, at the repository root.
ARTIFACTS_DIR = Path(__file__).resolve().parents[2] / "contracts" / "artifacts"


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
    """Load `contracts/artifacts/<name>.json` (or `<directory>/<name>.json`)."""
    path = (directory or ARTIFACTS_DIR) / f"{name}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return Artifact(
        name=data["contractName"],
        abi=data["abi"],
        bytecode=bytes.fromhex(data["bytecode"].removeprefix("0x")),
        deployed_bytecode=bytes.fromhex(data["deployedBytecode"].removeprefix("0x")),
        compiler=data["compiler"],
    )
