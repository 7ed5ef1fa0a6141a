"""Chain access for vxla nodes: the NodeRegistry, JobMarket, DisputeGame and Committee
contracts through web3, and the
watcher (with its state) and the verifier role that follow them; the daemon (node/daemon/)
plugs its executor into the watcher.

`ChainClient` owns the connection (nonces, gas, fees, receipts, revert decoding, logs);
`NodeRegistry`, `JobMarket`, `DisputeGame` and `Committee` are typed bindings over it;
`deploy` deploys all four, wired.
"""

from node.chain.artifacts import Artifact, load_artifact
from node.chain.client import ChainClient, Sender, TxResult
from node.chain.contracts import (
    Committee,
    Deployment,
    Dispute,
    DisputeGame,
    GameTerms,
    JobMarket,
    NodeInfo,
    NodeRegistry,
    OnChainJob,
    Panel,
    Phase,
    Slot,
    Stage,
    StepReferee,
    StepStage,
    Verdict,
    deploy,
    referees,
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
    "Committee",
    "ContractRevert",
    "Deployment",
    "Dispute",
    "DisputeGame",
    "Event",
    "GameTerms",
    "GasCapExceeded",
    "OnChainJob",
    "JobMarket",
    "NodeInfo",
    "NodeRegistry",
    "Panel",
    "Phase",
    "Sender",
    "Slot",
    "Stage",
    "StepReferee",
    "StepStage",
    "TransactionDropped",
    "TransactionReverted",
    "TxResult",
    "Verdict",
    "decode_receipt",
    "deploy",
    "fetch_events",
    "load_artifact",
    "referees",
]
