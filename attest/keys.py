"""Ed25519 node keys: key ids, key files, loading.

A key id is the lower-case hex SHA-256 of the raw 32-byte public key. Private keys are
PKCS#8 PEM files (optionally passphrase-encrypted), public keys SubjectPublicKeyInfo PEM.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest.digests import sha256_hex
from attest.errors import KeyFileError

PRIVATE_KEY_NAME = "node.key"
PUBLIC_KEY_NAME = "node.pub"


def raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """Key id: lower-case hex SHA-256 of the raw 32-byte public key (of a private key's pair)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    if not isinstance(public, Ed25519PublicKey):
        raise TypeError(f"expected an Ed25519 key, got {type(key).__name__}")
    return sha256_hex(raw_public_key(public))


def generate_private_key() -> Ed25519PrivateKey:
    """A fresh Ed25519 private key (from the operating system's randomness)."""
    return Ed25519PrivateKey.generate()


def private_key_pem(private_key: Ed25519PrivateKey, passphrase: bytes | None = None) -> bytes:
    """PKCS#8 PEM of `private_key`, encrypted with `passphrase` when one is given."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    return private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    """SubjectPublicKeyInfo PEM of `public_key`."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@dataclass(frozen=True)
class KeyFiles:
    """The files written by `init_key_files`."""

    private_path: Path
    public_path: Path
    key_id: str


def _write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Write `path` atomically with permissions `mode`, failing if it already exists.

    The bytes go to a temporary file in the same directory (created 0600 by mkstemp, then
    set to `mode` before any byte is written, so a private key is never readable by others),
    are synced, and the file is hard-linked into place: link() fails with FileExistsError
    instead of replacing, and readers never see a partial file.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp_name, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)


def _sync_directory(directory: Path) -> None:
    # Make the new directory entries durable (a crash right after must not lose the key).
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def init_key_files(
    directory: str | os.PathLike[str], *, passphrase: bytes | None = None
) -> KeyFiles:
    """Create a new key pair as `directory`/node.key (0600) and `directory`/node.pub (0644).

    What `vxla keys init` calls. Creates `directory` (0700) if needed. Refuses to overwrite:
    raises FileExistsError if either file exists, leaving both untouched. With `passphrase`,
    the private key is encrypted.
    """
    base = Path(directory)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_path, public_path = base / PRIVATE_KEY_NAME, base / PUBLIC_KEY_NAME
    for existing in (private_path, public_path):
        if existing.exists() or existing.is_symlink():
            raise FileExistsError(f"{existing}: already exists; refusing to overwrite a key file")
    private_key = generate_private_key()
    _write_new_file(private_path, private_key_pem(private_key, passphrase), 0o600)
    try:
        _write_new_file(public_path, public_key_pem(private_key.public_key()), 0o644)
    except BaseException:
        # Roll back: a private key without its public file is a half-initialised directory.
        private_path.unlink()
        raise
    _sync_directory(base)
    return KeyFiles(private_path=private_path, public_path=public_path, key_id=key_id(private_key))


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise KeyFileError(f"{path}: cannot read key file ({error.strerror or error})") from error


def load_private_key(
    path: str | os.PathLike[str], passphrase: bytes | None = None
) -> Ed25519PrivateKey:
    """Load an Ed25519 private key from a PKCS#8 PEM file (encrypted ones need `passphrase`)."""
    data = _read(path)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as error:
        # cryptography raises TypeError for a missing or unexpected passphrase.
        if passphrase is None:
            raise KeyFileError(
                f"{path}: the private key is encrypted; a passphrase is needed"
            ) from error
        raise KeyFileError(
            f"{path}: the private key is not encrypted; no passphrase is needed"
        ) from error
    except (ValueError, UnsupportedAlgorithm) as error:
        hint = "wrong passphrase or " if passphrase is not None else ""
        raise KeyFileError(f"{path}: {hint}not a valid PEM private key") from error
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 private key ({type(key).__name__})")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load an Ed25519 public key from a file: SubjectPublicKeyInfo PEM (what `vxla keys
    init` writes), or the raw key in hex (what a node's `GET /v1/key` gives)."""
    try:
        return parse_public_key(_read(path))
    except KeyFileError as error:
        raise KeyFileError(f"{path}: {error}") from None


def parse_public_key(data: bytes | str) -> Ed25519PublicKey:
    """An Ed25519 public key from SubjectPublicKeyInfo PEM, or from its 32 raw bytes in hex
    (64 digits, `0x` allowed): the two forms vxla prints, each read back."""
    text = data.decode("ascii", errors="replace") if isinstance(data, bytes) else data
    stripped = text.strip().removeprefix("0x")
    if len(stripped) == 64 and all(c in "0123456789abcdefABCDEF" for c in stripped):
        return public_key_from_raw(bytes.fromhex(stripped))
    try:
        key = serialization.load_pem_public_key(text.encode("utf-8", errors="replace"))
    except (ValueError, UnsupportedAlgorithm) as error:
        raise KeyFileError("not a public key: expected PEM (vxla keys init) or 64 hex digits (GET /v1/key)") from error
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"not an Ed25519 public key ({type(key).__name__})")
    return key


def public_key_from_raw(raw: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from its 32 raw bytes."""
    if len(raw) != 32:
        raise KeyFileError(f"raw public key: expected 32 bytes, got {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(bytes(raw))
