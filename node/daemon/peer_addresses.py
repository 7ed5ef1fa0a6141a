"""Which peer endpoints a node fetches from: only addresses on the public internet.

A peer's endpoint is whatever that node registered on chain, so without a check any
registrant could make every node send requests into its own network (loopback services,
cloud metadata at 169.254.169.254, private ranges). A URL is fetched from only when it is
http(s) and every address its host resolves to is global unicast, and the connection made is
checked again before its answer is read (the name could resolve differently the second
time). `[chain] allow_private_peers = true` turns the check off: the devnet runs every node
on 127.0.0.1. Redirects are never followed (httpx's default): an answer that points
elsewhere is no answer.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from node.errors import NodeError


class PeerAddressRefused(NodeError):
    """A peer URL the policy refuses: not http(s), or at an address that is not global."""


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (getaddrinfo), in the resolver's order."""
    return list(dict.fromkeys(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))


def address_refusal(address: str) -> str | None:
    """Why a node must not connect to `address`, or None for a global unicast address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind in ("loopback", "link_local", "multicast", "private", "unspecified", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return f"{ip} is a {kind.replace('_', '-')} address"
    if not ip.is_global:
        return f"{ip} is not a global address"
    return None


@dataclass(frozen=True)
class PeerAddressPolicy:
    """The check before and after connecting to a peer (see the module docstring)."""

    allow_private: bool = False
    resolver: Callable[[str, int], list[str]] = resolve

    def check(self, url: str) -> None:
        """Raises PeerAddressRefused unless `url` may be fetched from. A name that does not
        resolve now is not refused (the connection will fail, and be retried later)."""
        if self.allow_private:
            return
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as error:
            raise PeerAddressRefused(f"{url!r} is not a URL ({error})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PeerAddressRefused(f"{url!r} is not an http(s) URL with a host")
        try:
            addresses = self.resolver(parts.hostname, port)
        except (OSError, UnicodeError):
            return
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise PeerAddressRefused(f"{parts.hostname} resolves to {reason}")

    def check_connected(self, response: httpx.Response) -> None:
        """Raises PeerAddressRefused when the address `response` came from is not allowed (the
        name may have resolved differently for the connection than for `check`)."""
        if self.allow_private:
            return
        stream = response.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if peer is None:
            return  # a transport without sockets (tests' mock transports)
        reason = address_refusal(str(peer[0]))
        if reason is not None:
            raise PeerAddressRefused(f"{response.url}: connected to {reason}")
