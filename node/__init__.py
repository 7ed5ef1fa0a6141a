"""The vxla node: the daemon, its chain role, tracing, the SDK and the command line.

py_ecc (which web3 and eth_account import) raises the interpreter's recursion limit to
100,000 when it is first imported, far past what the C stack holds: a deeply nested JSON body
or expression would then crash the process instead of raising RecursionError. It is imported
here, first, and the limit put back, so no later import of web3 changes it
(tests/node/daemon/test_hostile_intake.py holds every module of the node to that). An installation
without the chain client (the emulated AArch64 one runs, compiles and verifies only) has no
py_ecc, and nothing to undo.
"""

import contextlib as _contextlib
import sys as _sys

_limit = _sys.getrecursionlimit()
with _contextlib.suppress(ModuleNotFoundError):
    import py_ecc  # noqa: F401  (for its import-time side effect, undone below)
_sys.setrecursionlimit(_limit)
del _limit
