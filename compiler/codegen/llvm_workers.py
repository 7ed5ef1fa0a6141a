"""Compiling a program's parts (partition.py) at once, in worker processes.

llvmlite serializes every call into LLVM behind one lock, so threads of one process cannot
run LLVM at the same time; processes can. The calling thread compiles parts itself while up
to `parallelism() - 1` worker processes (`python -m compiler.codegen.llvm_machine`, which
imports llvmlite alone) compile others, each part going to whoever is free next. A part's
object is the same bytes whichever process compiles it, so the number of processes changes
how long a compile takes, never what it makes.

Workers outlive a compile: a process that compiles again (a node's execution process, a test
session) reuses them. Each ends when its input closes, which its parent's exit does. Where no
process can be started (a sandbox that forbids it), the calling process compiles every part.
`VXLA_LLVM_JOBS` sets the number of processes compiling at once, the caller included (1:
the calling process alone); by default, the CPUs this process may run on.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from compiler.codegen import target
from compiler.codegen.llvm_machine import READY, Machine
from compiler.config import CompilerConfig, ConfigError
from compiler.errors import BackendError

JOBS_ENV = "VXLA_LLVM_JOBS"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def parallelism() -> int:
    """How many processes compile parts at once, the caller included."""
    configured = os.environ.get(JOBS_ENV, "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ConfigError(f"{JOBS_ENV} must be a whole number of processes, 1 or more, not {configured!r}")
        return int(configured)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class WorkerUnavailable(BackendError, OSError):
    """A worker process that could not start here (a sandbox that forbids what it needs)."""


class _Worker:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, environment.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "compiler.codegen.llvm_machine"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
        )
        self.started = False

    def wait_started(self) -> None:
        """Returns once the worker has loaded LLVM (WorkerUnavailable: it could not start)."""
        assert self.process.stdout is not None
        if not self.started:
            if self.process.stdout.read(1) != READY:
                self.process.wait()
                raise WorkerUnavailable(f"an LLVM worker process could not start (exit status {self.process.returncode})")
            self.started = True

    def compile(self, ir_text: str, machine: Machine) -> bytes:
        """The object of `ir_text` (BackendError: LLVM refused it, or the worker ended while
        compiling it; WorkerUnavailable: it never started)."""
        self.wait_started()
        assert self.process.stdout is not None
        data = ir_text.encode("utf-8")
        header = json.dumps({**dataclasses.asdict(machine), "ir_bytes": len(data)}).encode()
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(len(header).to_bytes(4, "big") + header + data)
            self.process.stdin.flush()
            answer = self.process.stdout.read(9)
            payload = self.process.stdout.read(int.from_bytes(answer[1:], "big")) if len(answer) == 9 else b""
        except OSError:
            answer = payload = b""
        if answer[:1] == b"O":
            return payload
        if answer[:1] == b"E":
            raise BackendError(f"LLVM failed on a part of the program: {payload.decode('utf-8', 'replace')}")
        code = self.process.poll()
        raise BackendError(f"an LLVM worker process ended while compiling (exit status {code})")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, wait: bool = True) -> None:
        """Ends the worker (it ends when its input closes); `wait`: until it has."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass  # it has ended already
        if wait:
            self.process.wait()


class _Idle:
    """The worker processes not compiling now (shared by every compile of this process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []

    def take(self) -> _Worker:
        with self._lock:
            while self._workers:
                worker = self._workers.pop()
                if worker.alive():
                    return worker
        return _Worker()

    def give_back(self, worker: _Worker) -> None:
        if worker.alive():
            with self._lock:
                self._workers.append(worker)


    def start(self, count: int) -> None:
        """Starts workers until `count` are idle (they import llvmlite meanwhile)."""
        with self._lock:
            missing = count - len(self._workers)
        for _ in range(max(missing, 0)):
            try:
                worker = _Worker()
            except OSError:
                return
            self.give_back(worker)


    def close_all(self) -> None:
        """Ends every idle worker (at this process's exit, which does not wait for one still
        starting: it ends once it reads the end of its input)."""
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close(wait=False)


_IDLE = _Idle()
atexit.register(_IDLE.close_all)


def prestart() -> None:
    """Starts the worker processes a large program's compile will use, so that they are
    ready when its parts are (call it before the passes and the lowering)."""
    _IDLE.start(parallelism() - 1)


class Compilation:
    """Parts compiled as they come: `submit` hands over each part's IR text (in order) and
    returns at once, worker processes compiling them meanwhile; `finish` compiles what no
    worker has taken, in this thread too, and returns every object in order. `abandon`
    stops it (a lowering that failed): nothing more is compiled."""

    def __init__(self, config: CompilerConfig, helpers: int | None = None) -> None:
        """`helpers`: worker processes at most (by default parallelism() - 1)."""
        target.target_machine(config)  # a config without an LLVM target is refused by name
        self.config = config
        self.machine = target.machine_of(config)
        self.helpers = parallelism() - 1 if helpers is None else helpers
        self.texts: list[str] = []
        self.objects: dict[int, bytes] = {}
        self.failures: list[BaseException] = []
        self._pending: list[int] = []  # indices not taken, first part first
        self._in_flight: set[int] = set()  # indices workers are compiling
        self._closed = False
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    def submit(self, text: str) -> None:
        with self._changed:
            self.texts.append(text)
            self._pending.append(len(self.texts) - 1)
            if len(self._threads) < min(self.helpers, len(self.texts)):
                thread = threading.Thread(target=self._helper, name=f"vxla-llvm-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._changed.notify()

    def finish(self) -> list[bytes]:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._compile_here()
        with self._changed:  # the parts workers are compiling (a worker still starting has none)
            while self._in_flight and not self.failures:
                self._changed.wait()
        if self.failures:
            raise self.failures[0]
        return [self.objects[index] for index in range(len(self.texts))]

    def _compile_here(self) -> None:
        """Compiles in this thread every part no worker has taken."""
        try:
            while (index := self._next(wait=False)) is not None:
                self.objects[index] = target.compile_ir(self.texts[index], self.config)
        except BaseException as exc:
            with self._changed:
                self.failures.append(exc)

    def abandon(self) -> None:
        with self._changed:
            self._closed = True
            self._pending.clear()
            self._changed.notify_all()

    def _next(self, wait: bool) -> int | None:
        """The next part to compile; None when there is none and (with `wait`) none will
        come, or a compile failed."""
        with self._changed:
            while True:
                if self.failures:
                    return None
                if self._pending:
                    index = self._pending.pop(0)
                    if wait:  # a helper's: finish waits for it
                        self._in_flight.add(index)
                    return index
                if self._closed or not wait:
                    return None
                self._changed.wait()

    def _helper(self) -> None:
        """Takes parts for one worker process, once it has started: a worker slow to start (a
        busy machine) holds no part back, since until then every part is left to `finish`."""
        try:
            worker = _IDLE.take()
            worker.wait_started()
        except OSError:  # no worker can start here (WorkerUnavailable): finish compiles every part
            return
        try:
            while (index := self._next(wait=True)) is not None:
                try:
                    compiled = worker.compile(self.texts[index], self.machine)
                except BaseException as exc:  # noqa: BLE001 - raised by finish
                    with self._changed:
                        self.failures.append(exc)
                        self._in_flight.discard(index)
                        self._changed.notify_all()
                    return
                with self._changed:
                    self.objects[index] = compiled
                    self._in_flight.discard(index)
                    self._changed.notify_all()
        finally:
            _IDLE.give_back(worker)
