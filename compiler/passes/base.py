"""The pass framework: a pass has a name, a version and `run(module) -> changed`; a pipeline
is an ordered list of passes and bounded fixed-point groups, fixed in code.

pipeline_id is the SHA-256 of the pipeline's description (every pass's name, version and
options, in order, with the groups' bounds); it is part of CompilerConfig and of every trace,
so a change to any pass that can change the optimized graph must bump that pass's version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from attest.digests import text_digest
from compiler.hlo.ir import Computation, Module
from compiler.hlo.verifier import verify_module
from compiler.passes.backend_decisions import decide


class Pass(Protocol):
    """One rewrite of a module, in place."""

    name: str
    version: int

    def run(self, module: Module) -> bool:
        """Rewrites `module`; returns whether anything changed."""
        ...

    def options(self) -> dict:
        """Settings that change what the pass does (part of pipeline_id)."""
        ...


@dataclass(frozen=True)
class FixedPoint:
    """Runs its passes in order, again and again, until none changes the module or
    `max_iterations` rounds have run."""

    name: str
    passes: tuple[Pass, ...]
    max_iterations: int = 8


Stage = Pass | FixedPoint
PassObserver = Callable[[int, str, Module], None]


def describe(stage: Stage) -> dict:
    if isinstance(stage, FixedPoint):
        return {"group": stage.name, "max_iterations": stage.max_iterations, "passes": [describe(p) for p in stage.passes]}
    return {"pass": stage.name, "version": stage.version, "options": stage.options()}


# Set (to 1): the pinned pipelines verify the module after every pass that changed it, which
# names the pass that broke it (make test sets it). Unset: once, after the last pass, which is
# all the backend relies on; verifying after each pass is about a third of a model's pass time.
VERIFY_EACH_ENV = "VXLA_VERIFY_EACH_PASS"


def verify_each_pass() -> bool:
    """Whether the pinned pipelines verify after every pass (VERIFY_EACH_ENV)."""
    return os.environ.get(VERIFY_EACH_ENV, "") not in ("", "0")


@dataclass
class Pipeline:
    """An ordered list of stages. `verify_each`: verify the module after every pass that
    changed it; otherwise once, after the last pass (when one changed it)."""

    stages: tuple[Stage, ...]
    verify_each: bool = True
    history: list[tuple[str, bool]] = field(default_factory=list)

    def description(self) -> list[dict]:
        return [describe(s) for s in self.stages]

    @property
    def pipeline_id(self) -> str:
        text = json.dumps(self.description(), sort_keys=True, separators=(",", ":"))
        return text_digest(text)

    def pass_names(self) -> list[str]:
        names: list[str] = []
        for stage in self.stages:
            names.extend(f"{p.name}@{p.version}" for p in (stage.passes if isinstance(stage, FixedPoint) else (stage,)))
        return names

    def run(self, module: Module, observer: PassObserver | None = None) -> Module:
        """Runs every stage on `module` (in place) and returns it, with the backend's
        decisions recorded on it (compiler/passes/backend_decisions.py: not a rewrite, so no
        stage and no part of pipeline_id; every pipeline records them, "none" included, since
        the input text may hold fusions). `observer` sees the module after every pass run,
        numbered from 1."""
        counter = 0
        first = len(self.history)

        def run_pass(p: Pass) -> bool:
            nonlocal counter
            changed = p.run(module)
            counter += 1
            self.history.append((p.name, changed))
            if self.verify_each and changed:
                # A pass that changed nothing leaves the module verified as it was (by the
                # parser, or after the last change): verifying it again is a quarter of a
                # compile's pass time for nothing.
                verify_module(module)
            if observer is not None:
                observer(counter, p.name, module)
            return changed

        for stage in self.stages:
            if isinstance(stage, FixedPoint):
                for _ in range(stage.max_iterations):
                    if not any([run_pass(p) for p in stage.passes]):
                        break
            else:
                run_pass(stage)
        if not self.verify_each and any(changed for _, changed in self.history[first:]):
            verify_module(module)  # what the backend is given is verified, whatever the setting
        decide(module)
        return module


class SimplePass:
    """Base for passes without options. A pass names itself and its version in its class
    line, `class DeadCodeElimination(SimplePass, name="dead-code-elimination", version=1)`:
    the two facts pipeline_id is made of, where a reader finds the pass."""

    name = "unnamed"
    version = 1

    def __init_subclass__(cls, name: str = "", version: int = 0, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if name:
            cls.name = name
        if version:
            cls.version = version

    def options(self) -> dict:
        return {}

    def run(self, module: Module) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError


class ComputationPass(SimplePass):
    """A pass that rewrites each computation on its own: `rewrite` runs on every computation
    of the module, in module order, whatever the others' outcome."""

    def rewrite(self, computation: Computation, module: Module) -> bool:  # pragma: no cover - overridden
        """Rewrites `computation` in place; returns whether anything changed."""
        raise NotImplementedError

    def run(self, module: Module) -> bool:
        return any([self.rewrite(computation, module) for computation in module.computations])
