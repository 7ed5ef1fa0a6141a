"""The node's exceptions: one base, NodeError, for everything the node package raises, so a
caller (the SDK's user, the daemon, the command line) can catch the package's errors as one
class. Each module defines its own subclasses beside the code that raises them.
"""

from __future__ import annotations

from core.errors import VxlaError


class NodeError(VxlaError):
    """A problem the node names in its message: bad input, a refused job or request, a chain
    or store failure."""


class JobRejected(NodeError, ValueError):
    """A job this node will not execute (bad module, wrong inputs, over a limit, a target it
    cannot run); the message names the reason. `status` is the HTTP status the API answers
    with: 400 bad input, 413 too large, 422 too much work. A local job ends `failed` with it;
    a chain job is left alone (before the claim) or never committed (after it)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
