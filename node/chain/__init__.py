"""Chain access for vxla nodes: the NodeRegistry and JobMarket contracts through web3, and the
watcher (with its state) and the verifier role that follow them; the daemon (node/daemon/)
plugs its executor into the watcher.

`ChainClient` owns the connection (nonces, gas, fees, receipts, revert decoding, logs);
`NodeRegistry` and `JobMarket` are typed bindings over it; `deploy` deploys both, wired.
"""

from node.chain.artifacts import Artifact, load_artifact
from node.chain.client import ChainClient, Sender, TxResult
from node.chain.contracts import (
    Deployment,
    JobMarket,
    NodeInfo,
    NodeRegistry,
    OnChainJob,
    Phase,
    Slot,
    deploy,
)
from node.chain.errors import (
    ChainError,
    ContractRevert,
    GasCapExceeded,
    TransactionDropped,
    TransactionReverted,
)
from node.chain.events import Event, decode_receipt, fetch_events

__all__ = [
    "Artifact",
    "ChainClient",
    "ChainError",
    "ContractRevert",
    "Deployment",
    "Event",
    "GasCapExceeded",
    "OnChainJob",
    "JobMarket",
    "NodeInfo",
    "NodeRegistry",
    "Phase",
    "Sender",
    "Slot",
    "TransactionDropped",
    "TransactionReverted",
    "TxResult",
    "decode_receipt",
    "deploy",
    "fetch_events",
    "load_artifact",
]
