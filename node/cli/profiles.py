"""`vxla run --profile OUT.json`: the run's timeline in the Chrome trace format (the JSON
object form, https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
which Perfetto and chrome://tracing open.

Three tracks of one process:
- `compile`: each stage of the compilation as it ran (none on a cache hit, one `cached` span);
- `run`: the run itself, whole;
- `steps`: each top-level step of the plan (a kernel, a copy, a loop) timed on its own in a
  second run, back to back, named as traces name instructions, with the op it computes and,
  where the HLO carries it, the user's source, and for a kernel how many of the run's threads
  its work items are split among. Each step costs a call from Python more than in the whole
  run, and the threads' own spans are not shown apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.atomic_files import write_text_atomic

TRACKS = ("compile", "run", "steps")


@dataclass
class Profile:
    """Spans on the tracks, in microseconds since the profile began."""

    began: float = field(default_factory=time.perf_counter)
    events: list[dict[str, Any]] = field(default_factory=list)
    _stage: tuple[str, float] | None = None

    def span(self, track: str, name: str, start: float, end: float, **args: object) -> None:
        """A span from `start` to `end` (time.perf_counter seconds) on `track`."""
        event = {"name": name, "ph": "X", "pid": 1, "tid": TRACKS.index(track) + 1, "ts": self._us(start), "dur": round((end - start) * 1e6, 3)}
        if args:
            event["args"] = args
        self.events.append(event)

    def stage(self, name: str | None) -> None:
        """The compile stage `name` begins now, and the one before it ends (None: the last ends)."""
        if self._stage is not None:
            self._close(self._stage[0] or "optimizing")
        self._stage = None if name is None else (name, time.perf_counter())

    def listener(self, also: Callable[[str], None] | None) -> Callable[[str], None]:
        """A compile progress listener that records each stage (compiler.api.CompileStage),
        and tells `also` too. The compiler says a stage as it starts, but a pass once it has
        run (`ran`): that names the span ending there. What follows the last pass, up to the
        code generation, is the lowering (LLVM starts on the first kernels meanwhile)."""

        def hear(stage: str) -> None:
            ran = getattr(stage, "ran", None)
            if ran is not None:
                self._close(f"pass {ran}")
                self._stage = ("", time.perf_counter())
            else:
                if self._stage is not None and not self._stage[0]:
                    self._close("lowering" if getattr(stage, "phase", "") == "codegen" else "optimizing")
                self.stage(stage)
            if also is not None:
                also(stage)

        return hear

    def _close(self, name: str) -> None:
        if self._stage is not None:
            self.span("compile", name, self._stage[1], time.perf_counter())
            self._stage = None

    def steps(self, start: float, timed: list[tuple[str, float]], about: Callable[[str], dict[str, str]]) -> None:
        """The steps of one step-by-step run from `start`, back to back: (name, seconds) each,
        with what `about(name)` says of it."""
        at = start
        for name, seconds in timed:
            self.span("steps", name, at, at + seconds, **about(name))
            at += seconds

    def write(self, path: str) -> None:
        names = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i + 1, "args": {"name": track}} for i, track in enumerate(TRACKS)]
        process = {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "vxla run"}}
        write_text_atomic(path, json.dumps({"traceEvents": [process, *names, *self.events], "displayTimeUnit": "ms"}) + "\n")

    def _us(self, seconds: float) -> float:
        return round((seconds - self.began) * 1e6, 3)
