"""What a `vxla` command ends with: its exit status, and the usage error that reports bad
input in one line. Imports nothing heavy: `vxla --help` and `--version` load it."""

from __future__ import annotations

from node.errors import NodeError

EXIT_OK = 0


EXIT_DIFFERENT = 1


EXIT_BAD_INPUT = 2


# vxla verify: every check it could make passed, but it did not re-execute (no module or no
# inputs given), so the trace's result is not verified.
EXIT_NOT_RE_EXECUTED = 3


class UsageError(NodeError):
    """Bad input from the user: reported on stderr, exit status 2."""
