"""The chain side of a node, as the daemon wires it.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.chain import ChainClient, JobMarket, NodeRegistry
from node.chain.divergence import DivergenceMonitor
from node.chain.executor import ChainExecutor


@dataclass
class ChainRole:
    """The chain side of a node: the market it follows, its executor and divergence monitor."""

    client: ChainClient
    market: JobMarket
    registry: NodeRegistry
    executor: ChainExecutor
    monitor: DivergenceMonitor
    address: str
