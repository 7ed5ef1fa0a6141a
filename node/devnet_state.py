"""What a devnet is, as `vxla devnet up` records it in its directory's state.json: the
chain's address and deployment, the submitter account and every node (URL, account, key,
process). node.devnet starts and stops devnets; the SDK reads this to connect to one."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from node.errors import NodeError

STATE_FILE = "state.json"


class DevnetError(NodeError):
    """A devnet that cannot be brought up, or a state file that is not ours."""


@dataclass
class ProcessInfo:
    """A child process `up` started: its pid and the command line it was started with."""

    pid: int
    argv: list[str]


@dataclass
class NodeInfo:
    """One devnet node."""

    index: int
    url: str
    port: int
    account: str
    key_id: str
    directory: str
    config: str
    process: ProcessInfo
    fault: str = ""  # "INSTRUCTION:BIT" for a node started with fault injection (demo only)


# Who decides a dispute's instruction on a devnet (`vxla devnet up --referee`): the step
# referee (the contract evaluates one scalar operation; the committee rules what it cannot),
# the default, or the committee alone.
REFEREES = ("steps", "committee")


@dataclass
class DevnetState:
    """What `up` started (the contents of state.json)."""

    directory: str
    rpc_url: str
    chain_id: int
    job_market: str
    node_registry: str
    deploy_block: int
    deployer: str
    submitter: str
    anvil: ProcessInfo
    nodes: list[NodeInfo] = field(default_factory=list)
    # The dispute game, the committee and the step referee (the registry names them too; ""
    # in a state file written before they were deployed, and no step referee when the
    # committee is the game's referee alone).
    dispute_game: str = ""
    committee: str = ""
    step_referee: str = ""

    def first_node_url(self) -> str:
        """The URL of node 0, the one a client of the devnet talks to; DevnetError if none."""
        if not self.nodes:
            raise DevnetError(f"{self.directory}: the devnet has no nodes")
        return self.nodes[0].url

    def to_json(self) -> str:
        """The state file's text."""
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def load(cls, directory: Path) -> DevnetState:
        """The state in `directory`; DevnetError if there is none or it is not readable."""
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            nodes = [
                NodeInfo(**{**n, "process": ProcessInfo(**n["process"])}) for n in data.pop("nodes")
            ]
            anvil = ProcessInfo(**data.pop("anvil"))
            return cls(**data, anvil=anvil, nodes=nodes)
        except FileNotFoundError:
            raise DevnetError(f"{path}: no devnet state (run `vxla devnet up`)") from None
        except (ValueError, TypeError, KeyError) as error:
            raise DevnetError(f"{path}: not a devnet state file ({error})") from None
