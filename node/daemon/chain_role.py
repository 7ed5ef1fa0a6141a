"""The chain side of a node, as the daemon wires it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from node.chain import ChainClient, DisputeGame, JobMarket, NodeRegistry, StepReferee, referees
from node.daemon.chain_executor import ChainExecutor
from node.daemon.divergence import DivergenceMonitor


@dataclass
class ChainRole:
    """The chain side of a node: the market it follows, its executor and divergence monitor,
    and the market's dispute game (`dispute_game()` reads it from the registry when not given)."""

    client: ChainClient
    market: JobMarket
    registry: NodeRegistry
    executor: ChainExecutor
    monitor: DivergenceMonitor
    address: str
    game: DisputeGame | None = None
    steps: StepReferee | None = None  # the game's referee, when it is the step referee
    _referees_read: bool = field(default=False, init=False, repr=False)

    def dispute_game(self) -> DisputeGame | None:
        """The DisputeGame the registry is wired to (asked once, then kept in `game`); None
        while the registry names none."""
        if self.game is None:
            address = self.registry.game()
            if int(address, 16) == 0:
                return None
            self.game = DisputeGame(self.client, address)
        return self.game

    def step_referee(self) -> StepReferee | None:
        """The step referee the registry wires as the game's referee (asked once), or None when
        the committee is the referee alone."""
        if not self._referees_read and int(self.registry.referee(), 16) != 0:
            self.steps = referees(self.client, self.registry)[1]
            self._referees_read = True
        return self.steps
