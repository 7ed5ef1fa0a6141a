"""The graphs of the node's pages (`/graphs/{digest}.svg`, node/daemon/pages.py), drawn in
child processes that are confined and bounded like execution processes (node/daemon/sandbox.py):
a drawing parses HLO its submitter wrote and runs Graphviz's `dot` on what came of it.

- Reach: the drawing process confines itself (node/daemon/confinement.py) once the compiler
  is loaded and before it reads the module: the execution processes' user (or root without
  capabilities) and Landlock, reading only the Python installation, vxla's packages and what
  `dot` needs (`GRAPHVIZ_READS`), starting no program but `dot`, writing nothing, no TCP.
- Bounds: a module over `limits.graph_module_bytes` is not drawn; the process and `dot` have
  `limits.graph_wall_seconds` of wall time (then the daemon kills their process group) and
  as much CPU time, and an address space of what the process had after loading the compiler
  plus `limits.graph_memory_bytes` (RLIMIT_AS, which `dot` inherits).
- Load: at most `limits.graph_drawings` drawings at once, with `limits.graph_queue` more
  waiting for a turn; past that a request is answered 503 with Retry-After at once. A
  waiting drawing whose clients have all gone is dropped when its turn comes, not drawn.
  Requests for a drawing already under way wait for that one. Drawing happens in threads of
  its own, never in the event loop or in the threads the other routes use, so /healthz and
  the API answer while graphs are drawn.
- Memory of outcomes: every outcome is kept, failures as well: a module that cannot be
  drawn (it does not parse, takes too long or too much memory, is too large) is refused for
  every highlight without drawing again, and once a module has been parsed a highlight
  naming no instruction of it is refused without a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import multiprocessing
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import anyio
from prometheus_client import CollectorRegistry, Counter

from core.lru import Lru
from node.daemon.config import Limits
from node.daemon.confinement import (
    Confinement,
    cap_address_space,
    confine,
    end_with_the_daemon,
    executable_files,
    execution_user,
)
from node.daemon.store import JobStore

log = logging.getLogger("vxla.node.drawing")

# What `dot` reads besides its own file and loader: shared libraries and its plugins, the
# loader's cache, and the fonts it measures labels with (absent ones are skipped).
GRAPHVIZ_READS = (
    "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/fonts", "/usr/share/fonts",
    "/usr/share/fontconfig", "/usr/local/share/fonts", "/var/cache/fontconfig",
)  # fmt: skip
GRAPHS_KEPT = 32  # drawings kept
GRAPHS_KEPT_BYTES = 128 << 20  # and their SVGs' bytes in all (one can be tens of megabytes)
FAILURES_KEPT = 1024  # failures kept (a line each)
NAMES_KEPT = 256  # modules whose instruction names are kept
MAX_HIGHLIGHT = 256  # characters of a highlighted instruction's name
RETRY_AFTER_S = 5  # what a busy answer tells the client to wait
# What the drawing process may send back: its answer's header (with the module's
# instruction names) and the SVG.
HEADER_MAX_BYTES = 16 << 20
SVG_MAX_BYTES = 64 << 20

Key = tuple[str, str | None, int | None]  # (module digest, highlighted instruction, scope depth)
MAX_DEPTH = 32  # the deepest scope a graph may be grouped at (JAX's op names nest a few levels)
Gone = Callable[[], Awaitable[bool]]  # whether a waiting request's client has gone


@dataclass(frozen=True)
class Outcome:
    """What a graph request is answered: 200 with the SVG and the highlighted path, or an
    error status with a detail saying why (and Retry-After when busy)."""

    status: int
    svg: bytes = b""
    path: tuple[str, ...] = ()
    detail: str = ""
    retry_after_s: int | None = None
    groups: tuple[int, ...] = ()  # boxes at each scope depth (node.graphs.GraphPicture.groups)
    source: str = ""  # the highlighted instruction's user source (GraphPicture.source)

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class DrawingRequest:
    """One drawing for a child process: the module's bytes, what to highlight, its bounds,
    `dot`'s path and the user the process becomes."""

    module: bytes
    highlight: str | None
    wall_seconds: float
    memory_bytes: int
    dot: str
    user: tuple[int, int] | None
    depth: int | None = None


@dataclass(frozen=True)
class Drawn:
    """A drawing process's outcome; `whole_module` when it holds for every highlight (the
    module cannot be drawn), `names` the module's instruction names when it parsed, and
    `confinement` what the process said holds."""

    outcome: Outcome
    whole_module: bool = True
    names: tuple[str, ...] | None = None
    confinement: dict | None = None


@dataclass
class _Pending:
    """A drawing waiting for its turn or under way, and the clients waiting for it."""

    waiters: list[Gone] = field(default_factory=list)
    task: asyncio.Task | None = None

    async def all_gone(self) -> bool:
        for gone in list(self.waiters):
            try:
                if not await gone():
                    return False
            except Exception:  # a client whose state cannot be read is taken as still waiting
                return False
        return True


class Drawings:
    """The graphs a node draws for its pages (the module docstring): `answer` is the one way
    in, from the event loop."""

    def __init__(self, store: JobStore, limits: Limits, registry: CollectorRegistry, dot: str | None = None) -> None:
        self._store = store
        self._limits = limits
        self._dot = dot or shutil.which("dot")
        self._user = execution_user()
        self._drawn: Lru[Key, Outcome] = Lru(GRAPHS_KEPT, GRAPHS_KEPT_BYTES, size=lambda outcome: len(outcome.svg))
        self._failed: Lru[Key, Outcome] = Lru(FAILURES_KEPT)
        self._module_failed: Lru[str, Outcome] = Lru(FAILURES_KEPT)
        self._names: Lru[str, frozenset[str]] = Lru(NAMES_KEPT)
        self._pending: dict[Key, _Pending] = {}
        self._turns = anyio.Semaphore(limits.graph_drawings)
        self._threads = anyio.CapacityLimiter(limits.graph_drawings)
        self.confinement: dict | None = None  # what the last drawing process said holds
        self.requests = Counter(
            "vxla_graph_requests", "Graph requests by answer (kept, drawn, failed, busy, dropped)", ["answer"], registry=registry
        )
        self.processes = Counter("vxla_graph_processes_started", "Drawing processes started", registry=registry)

    async def answer(self, digest: str, highlight: str | None, gone: Gone, depth: int | None = None) -> Outcome:
        """The graph of the module stored under `digest` with `highlight` marked (and the
        user's scopes `depth` deep grouped, node.graphs.graph_picture): a kept outcome, else
        a drawing (waiting for a turn while `gone()` is false), else busy."""
        key = (digest, highlight or None, depth)
        known = self._known(key)
        if known is not None:
            self.requests.labels(answer="kept").inc()
            return known
        if not await anyio.to_thread.run_sync(self._store.blobs.has, digest):  # a quick lookup: not a drawing's thread
            return Outcome(404, detail=f"module {digest}: not stored on this node")
        known = self._known(key)  # a drawing may have ended while the store was asked
        if known is not None:
            self.requests.labels(answer="kept").inc()
            return known
        pending = self._pending.get(key)
        if pending is None:
            if len(self._pending) >= self._limits.graph_drawings + self._limits.graph_queue:
                self.requests.labels(answer="busy").inc()
                return self._busy()
            pending = self._pending[key] = _Pending()
            pending.task = asyncio.create_task(self._draw(key, pending))
        pending.waiters.append(gone)
        try:
            assert pending.task is not None
            # Shielded: a request that is cancelled leaves the drawing to the others waiting.
            return await asyncio.shield(pending.task)
        finally:
            pending.waiters.remove(gone)

    def _known(self, key: Key) -> Outcome | None:
        """A kept outcome for `key`, or a refusal that needs no drawing."""
        digest, highlight, depth = key
        if depth is not None and not 1 <= depth <= MAX_DEPTH:
            return Outcome(422, detail=f"depth {depth}: from 1 to {MAX_DEPTH}")
        for kept in (self._drawn.get(key), self._module_failed.get(digest), self._failed.get(key)):
            if kept is not None:
                return kept
        if highlight is not None and len(highlight) > MAX_HIGHLIGHT:
            return Outcome(422, detail=f"highlight: over {MAX_HIGHLIGHT} characters: no instruction has such a name")
        names = self._names.get(digest)
        if highlight is not None and names is not None and highlight not in names:
            some = ", ".join(sorted(names)[:12])
            return Outcome(422, detail=f"cannot draw the graph: no instruction {highlight!r} in the optimized graph; its instructions are named as in its canonical text: {some}, ...")
        missing = self.cannot_draw()
        if missing is not None:
            return Outcome(503, detail=missing)
        return None

    def cannot_draw(self) -> str | None:
        """Why this node draws no graph at all (None when it can): the pages say it in place
        of a picture."""
        if self._dot is None:
            return "this node cannot draw graphs: Graphviz's dot program is not installed (Debian: apt-get install graphviz)"
        return None

    def _busy(self) -> Outcome:
        limits = self._limits
        detail = f"the node is drawing other graphs ({limits.graph_drawings} at once, {limits.graph_queue} waiting): try again"
        return Outcome(503, detail=detail, retry_after_s=RETRY_AFTER_S)

    async def _draw(self, key: Key, pending: _Pending) -> Outcome:
        try:
            async with self._turns:
                if await pending.all_gone():
                    self.requests.labels(answer="dropped").inc()
                    return Outcome(503, detail="dropped: every client asking for this graph had gone")
                try:
                    drawn = await anyio.to_thread.run_sync(self._draw_now, *key, limiter=self._threads)
                except Exception as error:  # the node's trouble (no process could start, say): said, not kept
                    log.exception("drawing the graph of %s failed", key[0])
                    return Outcome(503, detail=f"cannot draw the graph now ({type(error).__name__}: {error}): try again", retry_after_s=RETRY_AFTER_S)
            self._keep(key, drawn)
            self.requests.labels(answer="drawn" if drawn.outcome.ok else "failed").inc()
            return drawn.outcome
        finally:
            del self._pending[key]

    def _draw_now(self, digest: str, highlight: str | None, depth: int | None) -> Drawn:
        """Draws in a child process (in a thread of this class's own). A module the store
        cannot give (BlobError: damaged, say) raises: the node's trouble, not kept."""
        module = self._store.blobs.get(digest)
        limits = self._limits
        if len(module) > limits.graph_module_bytes:
            detail = (f"module: {len(module)} bytes, over limits.graph_module_bytes ({limits.graph_module_bytes}): this node does not "
                      f"draw it (vxla graph draws it on your machine, from GET /v1/blobs/{digest})")  # fmt: skip
            return Drawn(Outcome(413, detail=detail))
        assert self._dot is not None
        self.processes.inc()
        request = DrawingRequest(module, highlight, limits.graph_wall_seconds, limits.graph_memory_bytes, self._dot, self._user, depth)
        return draw_in_a_process(request)

    def _keep(self, key: Key, drawn: Drawn) -> None:
        digest = key[0]
        if drawn.names is not None:
            self._names.put(digest, frozenset(drawn.names))
        if drawn.confinement is not None:
            if self.confinement is None:
                what = Confinement.from_dict(drawn.confinement).describe("drawing processes", "the Python installation and Graphviz")
                log.info("%s", what)
            self.confinement = drawn.confinement
        if drawn.outcome.ok:
            self._drawn.put(key, drawn.outcome)
        elif drawn.whole_module:
            self._module_failed.put(digest, drawn.outcome)
        else:
            self._failed.put(key, drawn.outcome)


# --- the drawing process, seen from the daemon ---------------------------------------------
def draw_in_a_process(request: DrawingRequest) -> Drawn:
    """Draws `request` in a new child process (started with `spawn`: nothing forked from the
    daemon's threads) and ends it, and anything it started, before returning."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_drawing_process, args=(sender, request), name="vxla-drawing", daemon=True)
    deadline = time.monotonic() + request.wall_seconds
    process.start()
    sender.close()
    try:
        return _answer(receiver, process, request, deadline)
    finally:
        _end(process)
        receiver.close()


def _answer(receiver: Connection, process: multiprocessing.process.BaseProcess, request: DrawingRequest, deadline: float) -> Drawn:
    too_long = Outcome(422, detail=f"cannot draw the graph: it takes over limits.graph_wall_seconds ({request.wall_seconds:g} s) to draw")
    try:
        if not receiver.poll(max(0.0, deadline - time.monotonic())):
            return Drawn(too_long)
        header = json.loads(receiver.recv_bytes(HEADER_MAX_BYTES))
        if not header["ok"]:
            outcome = Outcome(int(header["status"]), detail=str(header["error"]))
            return Drawn(outcome, bool(header["whole_module"]), _names(header), header.get("confinement"))
        if not receiver.poll(max(0.0, deadline - time.monotonic())):
            return Drawn(too_long)
        svg = receiver.recv_bytes(SVG_MAX_BYTES)
        outcome = Outcome(200, svg=svg, path=tuple(str(step) for step in header["path"]), groups=tuple(int(n) for n in header.get("groups", ())),
                          source=str(header.get("source", "")))  # fmt: skip
        return Drawn(outcome, False, _names(header), header.get("confinement"))
    except (EOFError, OSError, ValueError, KeyError, TypeError) as error:
        return Drawn(Outcome(422, detail=f"cannot draw the graph: the drawing process {_how_it_ended(process, request, error)}"))


def _names(header: dict) -> tuple[str, ...] | None:
    names = header.get("names")
    return tuple(str(name) for name in names) if isinstance(names, list) else None


def _how_it_ended(process: multiprocessing.process.BaseProcess, request: DrawingRequest, error: Exception) -> str:
    process.join(1.0)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        if name == "SIGXCPU":
            return f"was killed by {name} (past its CPU time, limits.graph_wall_seconds ({request.wall_seconds:g} s))"
        # Past RLIMIT_AS a failed allocation may abort, and a stack that cannot grow faults.
        return f"was killed by {name} (past limits.graph_memory_bytes ({request.memory_bytes})?)"
    if code is not None:
        return f"ended with exit status {code} before answering"
    return f"sent an answer that cannot be read ({type(error).__name__}: {error})"


def _end(process: multiprocessing.process.BaseProcess) -> None:
    """Kills the drawing process's group (it and `dot`); the process is not reaped before,
    so its id, which names the group, cannot have been reused."""
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError, ValueError):
        process.kill()
    process.join(5.0)


# --- the drawing process itself -------------------------------------------------------------
def _drawing_process(connection: Connection, request: DrawingRequest) -> None:
    """Loads the compiler, bounds and confines itself, then parses, lays out and draws; one
    answer: a JSON header, then (when drawn) the SVG."""
    os.setsid()  # a group of its own, which `dot` joins: the daemon ends both at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when it stops
    end_with_the_daemon(lambda: os.killpg(0, signal.SIGKILL))  # the drawing and its `dot`
    from compiler.api import load_config
    from node.graphs import graph_picture  # noqa: F401 - loads the compiler's passes and Graphviz's binding

    config = load_config()
    _bound(request)
    try:
        confinement = confine(None, request.user, reads=GRAPHVIZ_READS, executables=executable_files(request.dot))
    except OSError as error:
        header: dict = {"ok": False, "status": 503, "error": f"cannot confine the drawing process: {error}", "whole_module": True}
        connection.send_bytes(json.dumps(header).encode())
        return
    header, svg = _drawing(request, config)
    connection.send_bytes(json.dumps({**header, "confinement": confinement.to_dict()}).encode())
    if header["ok"]:
        connection.send_bytes(svg)


def _bound(request: DrawingRequest) -> None:
    """CPU time as the wall limit, and the address space as the execution processes cap
    theirs (node/daemon/sandbox.py): what the process has now, the compiler loaded, plus the
    drawing's memory; both hold for `dot` too, which inherits them."""
    seconds = max(1, math.ceil(request.wall_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of what a hostile module made of it
    cap_address_space(request.memory_bytes)


def _drawing(request: DrawingRequest, config: Any) -> tuple[dict, bytes]:  # noqa: ANN401 - a CompilerConfig
    """(the answer's header, the SVG) for `request`, in the confined process."""
    from compiler.api import load_program
    from node.graphs import UnknownInstruction, graph_picture

    def failed(status: int, error: str, whole_module: bool = True, names: tuple[str, ...] | None = None) -> tuple[dict, bytes]:
        return {"ok": False, "status": status, "error": error, "whole_module": whole_module, "names": names}, b""

    too_much = f"cannot draw the graph: it needs more memory than limits.graph_memory_bytes ({request.memory_bytes}) allows"
    try:
        program = load_program(request.module.decode("utf-8"))
        picture = graph_picture(program, config, request.highlight, request.depth)
    except UnknownInstruction as error:
        return failed(422, f"cannot draw the graph: {error}", False, error.names)
    except MemoryError:
        return failed(422, too_much)
    except RecursionError:
        return failed(422, "cannot draw the graph: the module is nested too deeply")
    except UnicodeDecodeError:
        return failed(422, "cannot draw the graph: the module is not UTF-8 text")
    except Exception as error:  # the module's fault (it does not parse or verify), said as such
        return failed(422, f"cannot draw the graph: {type(error).__name__}: {error}")
    try:
        done = subprocess.run([request.dot, "-Tsvg"], input=picture.dot.encode(), capture_output=True, check=False)
    except MemoryError:
        return failed(422, too_much)
    except OSError as error:
        return failed(503, f"cannot draw the graph: Graphviz's dot cannot be started here ({error})")
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        if done.returncode < 0:
            reason = f"killed by {signal.Signals(-done.returncode).name} (over its CPU time or memory?)"
        return failed(422, f"cannot draw the graph: Graphviz's dot failed: {reason}")
    return {"ok": True, "path": list(picture.path), "names": list(picture.names), "groups": list(picture.groups), "source": picture.source}, done.stdout
