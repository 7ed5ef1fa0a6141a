"""The backend of each target row (compiler/targets.py `backend`): the one table a new
backend joins."""

from __future__ import annotations

from compiler.codegen import nvptx
from compiler.codegen.backend import CPU, Backend
from compiler.config import CompilerConfig
from compiler.errors import ConfigError

BACKENDS: dict[str, Backend] = {"native": CPU, "nvptx": nvptx.BACKEND}


def backend_for(config: CompilerConfig) -> Backend:
    """The backend the config's target row names."""
    backend = BACKENDS[config.architecture.backend]
    if config.schedule_perturbation and not backend.schedule_perturbation:
        raise ConfigError(f"schedule perturbation is a test setting of the host's worker threads; {config.cpu} code has none")
    return backend
