"""The chain side of a node, as the daemon wires it.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.chain import ChainClient, JobMarket, NodeRegistry
from node.daemon.chain_executor import ChainExecutor
from node.daemon.divergence import DivergenceMonitor


@dataclass
class ChainRole:
    """The chain side of a node: the market it follows, its executor and divergence monitor."""

    client: ChainClient
    market: JobMarket
    registry: NodeRegistry
    executor: ChainExecutor
    monitor: DivergenceMonitor
    address: str
