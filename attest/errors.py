"""The exceptions of the attest layer.

Every message names what failed (a field path, a signature index and key id, a file), so a
command line can print it as is.
"""

from __future__ import annotations

from core.errors import VxlaError


class AttestError(VxlaError, ValueError):
    """Base class of every error the attest layer raises on bad data."""


class StatementError(AttestError):
    """A statement (or one of its parts) is malformed; `path` names the field, e.g.
    ``predicate.deterministic.graph_hash``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class EnvelopeError(AttestError):
    """A DSSE envelope is malformed (before any signature is checked)."""


class KeyFileError(AttestError):
    """A key file cannot be read, decrypted or is not an Ed25519 key."""


class MerkleError(AttestError):
    """A Merkle tree or inclusion proof argument is malformed."""


class DigestVersionError(AttestError):
    """A tensor digest version this vxla does not know (the message names it and the known
    ones)."""


class ElementProofError(AttestError):
    """An element proof (attest.tensor_proof) is malformed or does not verify against the
    tensor digest it is checked with; the message names what failed."""


class VerificationError(AttestError):
    """An envelope failed verification; the message names the check that failed."""
