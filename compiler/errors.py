"""The compiler's exceptions: one base, CompilerError, for everything the compiler raises about
its input (a module, a configuration, a run's arguments or limits), so a caller can refuse the
input by catching one class. It derives from core.errors.VxlaError, the root of vxla's tree. The HLO frontend's errors (compiler/hlo/errors.py) derive from it.
"""

from __future__ import annotations

from core.errors import VxlaError


class CompilerError(VxlaError):
    """A problem with what the compiler was given; the message names it."""


class ConfigError(CompilerError, ValueError):
    """A configuration that cannot be used; the message names the key."""


class BackendError(CompilerError, RuntimeError):
    """The backend failed on a program it accepted: machine code that references a symbol it
    does not define, PTX that breaks the numerics contract, a toolchain's refusal. Not the
    input's fault; the message names what failed. (Also a RuntimeError, as it always was.)"""


class ExecutionError(CompilerError):
    """A run that cannot produce outputs: arguments that do not match the parameters, a while
    loop past its trip-count limit, a deadline passed, code this host cannot execute.
    `instruction`: the optimized module's instruction a compiled run stopped at, where there
    is one (compiler.driver.user_source names the user's source of it)."""

    def __init__(self, message: str, instruction: str | None = None) -> None:
        super().__init__(message)
        self.instruction = instruction


class TargetNotRunnable(ExecutionError):
    """Code for a target this host cannot execute (a CPU without a feature the code may use, no
    GPU or driver for a GPU target); the message names what is missing."""


class FloatingPointEnvironmentError(ExecutionError, RuntimeError):
    """This process's floating-point environment is not IEEE round-to-nearest-even with
    subnormals (a library built with fast-math set FTZ/DAZ): nothing it computes can be
    trusted, so nothing runs."""


class ArgumentError(ExecutionError, ValueError):
    """Arguments that do not match the entry parameters (count, element type or shape)."""
