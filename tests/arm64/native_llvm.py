"""LLVM run natively for an emulated test session.

`python -m tests.arm64.native_llvm -- COMMAND...` serves object emission on a Unix socket and
runs COMMAND (an emulated pytest of `make test-arm64`) with VXLA_NATIVE_LLVM naming it. In
that session `compile_ir` sends its IR text here and gets back the bytes this process's
llvmlite emits (tests/conftest.py installs the client). Everything else, the Python compiler
from HLO text to LLVM IR, loading and executing the code, stays emulated.

LLVM emits the same aarch64 bytes emulated and native (tests/arm64/test_emulated.py
`test_emulated_llvm_emits_the_native_bytes` compiles under emulation to show it), and LLVM
under QEMU takes 3-7 s for a module of one op, about ten times the emulated Python before it.
A request whose llvmlite or LLVM version differs from this process's is refused, since its
bytes could differ.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

from compiler.codegen.llvm_workers import JOBS_ENV

ADDRESS_VARIABLE = "VXLA_NATIVE_LLVM"
KEY_VARIABLE = "VXLA_NATIVE_LLVM_KEY"
OK, FAILED = b"\x00", b"\x01"


def _answer(request: bytes) -> bytes:
    from compiler.codegen.target import compile_ir
    from compiler.config import CompilerConfig

    message = json.loads(request)
    config = CompilerConfig(**message["config"])
    sent, here = message["config"], asdict(config)
    for version in ("llvmlite_version", "llvm_version"):
        if sent[version] != here[version]:
            return FAILED + f"the emulated {version} {sent[version]} is not the native {here[version]}".encode()
    try:
        return OK + compile_ir(message["ir"], config)
    except Exception as exc:  # noqa: BLE001 - the failure goes back to the caller, whole
        return FAILED + f"{type(exc).__name__}: {exc}".encode()


def _serve_connection(connection: Connection) -> None:
    with connection:
        while True:
            try:
                request = connection.recv_bytes()
            except EOFError:
                return
            connection.send_bytes(_answer(request))


def _serve(listener: Listener) -> None:
    while True:
        try:
            connection = listener.accept()
        except OSError:
            return  # the listener was closed: the command has ended
        threading.Thread(target=_serve_connection, args=(connection,), daemon=True).start()


def run(command: list[str]) -> int:
    """Runs `command` with native object emission served to it; returns its exit code."""
    key = secrets.token_bytes(32)
    with tempfile.TemporaryDirectory(prefix="vxla-llvm-") as directory:
        address = str(Path(directory) / "llvm.sock")
        listener = Listener(address, family="AF_UNIX", authkey=key)
        threading.Thread(target=_serve, args=(listener,), daemon=True).start()
        try:
            # Every part of a program is compiled through this process, one at a time: an
            # LLVM worker process started in the session would be emulated.
            env = {**os.environ, ADDRESS_VARIABLE: address, KEY_VARIABLE: key.hex(), JOBS_ENV: "1"}
            return subprocess.run(command, env=env, check=False).returncode
        finally:
            listener.close()


def install_client() -> None:
    """In an emulated session started by `run`: `compile_ir` asks the native process. Called
    before any test module imports compile_ir, so every binding of the name is this one."""
    import compiler.codegen.target as target

    connection = Client(os.environ[ADDRESS_VARIABLE], family="AF_UNIX", authkey=bytes.fromhex(os.environ[KEY_VARIABLE]))
    lock = threading.Lock()

    def compile_ir(ir_text: str, config) -> bytes:
        """Object bytes for IR text, emitted by the native llvmlite (see the module doc)."""
        with lock:
            connection.send_bytes(json.dumps({"config": config.as_dict(), "ir": ir_text}).encode())
            answer = connection.recv_bytes()
        if answer[:1] != OK:
            raise RuntimeError(f"native LLVM: {answer[1:].decode()}")
        return answer[1:]

    target.compile_ir = compile_ir


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        sys.exit("usage: python -m tests.arm64.native_llvm -- COMMAND [ARGS...]")
    sys.exit(run(arguments))
