"""Key ids and key files."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from attest import (
    KeyFileError,
    init_key_files,
    key_id,
    load_private_key,
    load_public_key,
    parse_public_key,
    public_key_from_raw,
    public_key_pem,
    raw_public_key,
)
from tests.attest.traces import node_key


def test_key_id_is_sha256_of_the_raw_public_key() -> None:
    key = node_key("a")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert len(raw) == 32
    assert key_id(key) == key_id(key.public_key()) == hashlib.sha256(raw).hexdigest()
    assert key_id(public_key_from_raw(raw_public_key(key.public_key()))) == key_id(key)
    assert key_id(node_key("b")) != key_id(key)


def test_init_writes_a_private_key_0600_and_a_matching_public_key(tmp_path: Path) -> None:
    files = init_key_files(tmp_path / "keys")
    assert stat.S_IMODE(files.private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.public_path.stat().st_mode) == 0o644
    assert b"BEGIN PRIVATE KEY" in files.private_path.read_bytes()
    assert b"BEGIN PUBLIC KEY" in files.public_path.read_bytes()
    private, public = load_private_key(files.private_path), load_public_key(files.public_path)
    assert key_id(private) == key_id(public) == files.key_id
    message = b"signed"
    public.verify(private.sign(message), message)
    # No temporary files are left behind.
    assert sorted(p.name for p in files.private_path.parent.iterdir()) == ["node.key", "node.pub"]


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    files = init_key_files(tmp_path)
    before = files.private_path.read_bytes(), files.public_path.read_bytes()
    with pytest.raises(FileExistsError, match="node.key: already exists"):
        init_key_files(tmp_path)
    assert (files.private_path.read_bytes(), files.public_path.read_bytes()) == before
    # A lone public file also blocks, and nothing is written.
    other = tmp_path / "other"
    other.mkdir()
    (other / "node.pub").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="node.pub: already exists"):
        init_key_files(other)
    assert sorted(p.name for p in other.iterdir()) == ["node.pub"]


def test_passphrase_encrypted_private_key(tmp_path: Path) -> None:
    files = init_key_files(tmp_path, passphrase=b"correct horse")
    assert b"ENCRYPTED PRIVATE KEY" in files.private_path.read_bytes()
    assert key_id(load_private_key(files.private_path, b"correct horse")) == files.key_id
    with pytest.raises(KeyFileError, match="a passphrase is needed"):
        load_private_key(files.private_path)
    with pytest.raises(KeyFileError, match="wrong passphrase"):
        load_private_key(files.private_path, b"wrong")


def test_loading_bad_key_files_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.key"
    with pytest.raises(KeyFileError, match="missing.key: cannot read key file"):
        load_private_key(missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a key")
    with pytest.raises(KeyFileError, match="garbage.pem: not a valid PEM private key"):
        load_private_key(garbage)
    with pytest.raises(KeyFileError, match=r"garbage.pem: not a public key: expected PEM \(vxla keys init\) or 64 hex digits"):
        load_public_key(garbage)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_private = tmp_path / "ec.key"
    ec_private.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ec_public = tmp_path / "ec.pub"
    ec_public.write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(KeyFileError, match="ec.key: not an Ed25519 private key"):
        load_private_key(ec_private)
    with pytest.raises(KeyFileError, match="ec.pub: not an Ed25519 public key"):
        load_public_key(ec_public)
    plain = init_key_files(tmp_path / "plain")
    with pytest.raises(KeyFileError, match="not encrypted"):
        load_private_key(plain.private_path, b"unneeded")


def test_a_public_key_reads_back_from_either_form_vxla_prints(tmp_path: Path) -> None:
    """PEM (vxla keys init) and the raw key in hex (a node's GET /v1/key), from a file or
    as text, with or without 0x: the same key; 63 digits or a non-hex digit are refused."""
    files = init_key_files(tmp_path)
    key = load_public_key(files.public_path)
    raw_hex = raw_public_key(key).hex()
    for text in (raw_hex, f"0x{raw_hex}\n", raw_hex.upper(), public_key_pem(key).decode()):
        assert key_id(parse_public_key(text)) == files.key_id
        (tmp_path / "k.txt").write_text(text)
        assert key_id(load_public_key(tmp_path / "k.txt")) == files.key_id
    for bad in (raw_hex[:-1], raw_hex[:-1] + "g"):
        with pytest.raises(KeyFileError, match="not a public key"):
            parse_public_key(bad)
