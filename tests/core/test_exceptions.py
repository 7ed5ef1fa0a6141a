"""One exception tree a user can catch: every exception class vxla defines derives from
core.errors.VxlaError (through CompilerError, AttestError or NodeError), but for the few
signals that never leave the module that raises them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from attest.errors import AttestError
from compiler.errors import CompilerError
from core.errors import VxlaError
from node.errors import NodeError

# Raised and caught inside one module, never seen by a caller.
INTERNAL_SIGNALS = {
    "compiler.hlo.verifier.checks.Fail": "a shape rule's refusal, turned into HloVerifyError by the verifier",
    "compiler.hlo.verifier.checks.Unsupported": "a shape rule's refusal, turned into HloUnsupportedError by the verifier",
    "node.daemon.intake.BodyTooLarge": "a request body over the limit, answered 413 by the API",
}


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for package in ("core", "attest", "compiler", "node"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            found.extend(
                value for value in vars(module).values()
                if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
            )  # fmt: skip
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


@pytest.mark.parametrize("error", _exception_classes(), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_every_exception_vxla_defines_is_in_the_one_tree(error: type[BaseException]) -> None:
    name = f"{error.__module__}.{error.__qualname__}"
    if name in INTERNAL_SIGNALS:
        return
    assert issubclass(error, VxlaError), f"{name} does not derive from VxlaError"
    part = error.__module__.split(".")[0]
    assert issubclass(error, {"core": VxlaError, "attest": AttestError, "compiler": CompilerError, "node": NodeError}[part]), name


def test_the_parts_roots_share_the_root() -> None:
    assert all(issubclass(base, VxlaError) for base in (CompilerError, AttestError, NodeError))
    assert set(INTERNAL_SIGNALS) <= {f"{c.__module__}.{c.__qualname__}" for c in _exception_classes()}
