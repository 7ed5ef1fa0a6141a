"""A node's address as users type it, read one way by the SDK and the command line."""

from __future__ import annotations

from urllib.parse import urlsplit


def node_url(text: str) -> str:
    """A node's base URL from what a user types: `http://` or `https://` URLs as they are, and
    `host:port` (no scheme) as `http://host:port`. ValueError, saying why, for anything
    else (another scheme, no host, a port that is not a number)."""
    given = text.strip()
    url = given if "://" in given else f"http://{given}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{given!r}: a node speaks http or https, not {parts.scheme or 'nothing'}")
    if not parts.hostname:
        raise ValueError(f"{given!r} names no host (e.g. http://127.0.0.1:8700)")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        raise ValueError(f"{given!r}: the port is not a number from 0 to 65535") from None
    return url.rstrip("/")
