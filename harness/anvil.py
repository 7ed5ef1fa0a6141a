"""anvil (the pinned npm build of contracts/package-lock.json) on a free port: the contract
tests on anvil (tests/contracts/test_anvil.py, whose `anvil` fixture the node tests share)
and the chaos campaign (harness/chaos.py) start it with `running_anvil`."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from web3 import HTTPProvider, Web3

from node.devnet import CHECKOUT_ANVIL

# The tests run the pinned build, never an anvil on PATH.
ANVIL = Path(__file__).resolve().parents[1] / CHECKOUT_ANVIL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_anvil(log: Path | None = None) -> Iterator[tuple[Web3, int]]:
    """anvil on a free port, with its output in `log` (or its errors kept for the message
    when it fails to start); yields the connection and the port, stopped at the end."""
    assert ANVIL.is_file(), "anvil is installed by `make contracts` (npm ci in contracts/)"
    port = _free_port()
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("ab")) if log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(
            [str(ANVIL), "--port", str(port), "--host", "127.0.0.1", "--silent", "--chain-id", "31337"],
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
        )
    try:
        w3 = Web3(HTTPProvider(f"http://127.0.0.1:{port}", request_kwargs={"timeout": 30}))
        deadline = time.monotonic() + 60
        while not w3.is_connected():
            if proc.poll() is not None:
                raise RuntimeError(f"anvil exited: {proc.stderr.read().decode(errors='replace') if proc.stderr else f'see {log}'}")
            if time.monotonic() > deadline:
                raise RuntimeError("anvil did not answer within 60 s")
            time.sleep(0.1)
        yield w3, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
