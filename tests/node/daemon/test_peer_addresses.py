"""Peers a node can trust to be remote: a registered endpoint that resolves to a loopback,
private, link-local, multicast or otherwise non-global address is not fetched from, the
address actually connected to is checked again, and redirects are not followed. Real
sockets: a server on 127.0.0.1 stands for a service inside the node's own network."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from attest.digests import sha256_hex
from node.daemon.chain_executor import BlobFetcher, download
from node.daemon.peer_addresses import PeerAddressPolicy, PeerAddressRefused, address_refusal
from node.daemon.store import BlobError, JobStore

BLOB = b"bytes a peer serves"


class _Handler(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.requests.append(self.path)
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/v1/blobs/" + sha256_hex(BLOB))
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BLOB)))
        self.end_headers()
        self.wfile.write(BLOB)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.0.7", "169.254.169.254", "fe80::1", "fc00::1",
     "224.0.0.251", "ff02::1", "0.0.0.0", "::", "100.64.0.1", "::ffff:127.0.0.1", "240.0.0.1"],
)
def test_addresses_inside_a_network_are_refused(address: str) -> None:
    assert address_refusal(address) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2001:4860:4860::8888"])
def test_global_addresses_are_allowed(address: str) -> None:
    assert address_refusal(address) is None


def test_a_name_is_refused_if_any_of_its_addresses_is_inside() -> None:
    names = {"metadata.internal": ["169.254.169.254"], "mixed.example": ["93.184.216.34", "10.0.0.5"], "public.example": ["93.184.216.34"]}
    policy = PeerAddressPolicy(resolver=lambda host, port: names[host])
    with pytest.raises(PeerAddressRefused, match="link-local"):
        policy.check("http://metadata.internal/v1/blobs/x")
    with pytest.raises(PeerAddressRefused, match="private"):
        policy.check("https://mixed.example:8443/")
    policy.check("https://public.example/")
    for url in ("ftp://public.example/", "::garbage", "http:///nohost", "http://public.example:99999/"):
        with pytest.raises(PeerAddressRefused):
            policy.check(url)
    PeerAddressPolicy(allow_private=True, resolver=lambda host, port: names[host]).check("http://metadata.internal/")


def test_a_peer_on_loopback_is_not_asked_unless_allowed(local_server: str, tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    try:
        _Handler.requests.clear()
        strict = BlobFetcher(store, lambda: [local_server])
        with pytest.raises(BlobError, match="1 peer"):
            strict.ensure(sha256_hex(BLOB))
        assert _Handler.requests == [] and not store.blobs.has(sha256_hex(BLOB))
        devnet = BlobFetcher(store, lambda: [local_server], policy=PeerAddressPolicy(allow_private=True))
        assert devnet.ensure(sha256_hex(BLOB)) == BLOB
    finally:
        store.close()


def test_the_address_connected_to_is_checked_again(local_server: str, tmp_path: Path) -> None:
    # The name resolves to a public address when checked, but the connection lands on
    # loopback (DNS rebinding): the answer is dropped before it is read.
    rebinding = PeerAddressPolicy(resolver=lambda host, port: ["93.184.216.34"])
    with httpx.Client(timeout=10) as http, pytest.raises(PeerAddressRefused, match="loopback"):
        download(http, f"{local_server}/v1/blobs/x", None, policy=rebinding)
    store = JobStore(tmp_path)
    try:
        with pytest.raises(BlobError):
            BlobFetcher(store, lambda: [local_server], policy=rebinding).ensure(sha256_hex(BLOB))
        assert not store.blobs.has(sha256_hex(BLOB))
    finally:
        store.close()


def test_a_redirect_is_not_followed(local_server: str) -> None:
    _Handler.requests.clear()
    with httpx.Client(timeout=10) as http:
        assert download(http, f"{local_server}/redirect", None, policy=PeerAddressPolicy(allow_private=True)) is None
    assert _Handler.requests == ["/redirect"]
