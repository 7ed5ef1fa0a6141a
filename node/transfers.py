"""Answers from an HTTP peer that is not trusted, read within bounds, so that the peer can
make the reader neither hold unbounded data nor wait without end: the SDK's requests to a
node (node/sdk.py) and the daemon's downloads from other nodes (blobs, traces, keys).

- A body is counted as it streams in and dropped as soon as it passes its bound (at once when
  its Content-Length already does); the caller names the bound from what the answer should
  hold (a trace by a protocol maximum, a tensor by its recorded type and shape).
- A transfer has one deadline for all of it: connecting, sending, the status line, headers and
  every byte of the body. An HTTP client's timeout bounds each read only, so a peer sending a
  byte every few seconds never trips it; with a client on `deadline_transport()` every socket
  read and write waits at most until the deadline, so even an answer dripped byte by byte
  ends there. With another transport (tests' mock transports) the deadline is checked as each
  chunk arrives.
- Redirects are never followed, and no compressed body is asked for or taken (a small
  compressed body can inflate past any bound before it is counted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from node.errors import NodeError

# An answer that is not the route's content (a refusal, a redirect) says why in a few words.
ERROR_ANSWER_BYTES = 64 * 1024


class AnswerRefused(NodeError):
    """An answer taken no further: a body past the bound of what it should hold, one not
    complete by its transfer's deadline, a redirect (never followed), a compressed body (never
    asked for), or content that is not what the route serves (the SDK: not JSON, not a signed
    trace). The message names the URL and the problem."""


@dataclass(frozen=True)
class Answer:
    """A complete answer: its status, headers and body."""

    status: int
    headers: httpx.Headers
    body: bytes


# The monotonic time the transfer running in this context must be over by (None: no transfer).
_give_up: ContextVar[float | None] = ContextVar("vxla_transfer_give_up", default=None)


def fetch(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    max_bytes: int | None,
    max_seconds: float,
    what: str = "answer",
    on_answer: Callable[[httpx.Response], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    **request: Any,
) -> Answer:
    """The answer to `method url`, read within bounds: a success's body at most `max_bytes`
    (None: no bound), any other's at most ERROR_ANSWER_BYTES, all of it within `max_seconds`;
    AnswerRefused (naming `what` the body should be) past either, or for a compressed body.
    A redirect is returned as it is, not followed. `on_answer` sees the response before its
    body is read (to refuse it by raising); `on_bytes` hears the bytes of a success's body
    read so far, as they arrive (a download's progress). httpx.HTTPError for no answer."""
    give_up = time.monotonic() + max_seconds
    transfer = _Transfer(str(http.base_url.join(url)), what, max_seconds, give_up)
    headers = {"Accept-Encoding": "identity", **request.pop("headers", {})}
    token = _give_up.set(give_up)
    try:
        with http.stream(method, url, headers=headers, follow_redirects=False, **request) as response:
            if on_answer is not None:
                on_answer(response)
            bound = max_bytes if response.is_success else ERROR_ANSWER_BYTES
            heard = on_bytes if response.is_success else None
            return Answer(response.status_code, response.headers, transfer.read(response, bound, heard))
    except httpx.TimeoutException:
        if time.monotonic() >= give_up:  # the deadline cut a read short, not the peer's silence
            raise transfer.too_slow() from None
        raise
    finally:
        _give_up.reset(token)


@dataclass(frozen=True)
class _Transfer:
    url: str
    what: str
    max_seconds: float
    give_up: float

    def read(self, response: httpx.Response, max_bytes: int | None, on_bytes: Callable[[int], None] | None = None) -> bytes:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise AnswerRefused(f"{self.url}: {self.what} sent {encoding}-encoded, which was not asked for")
        declared = response.headers.get("content-length", "")
        if max_bytes is not None and declared.isdigit() and int(declared) > max_bytes:
            raise self.too_large(max_bytes)
        chunks, size = [], 0
        for chunk in response.iter_bytes():  # as sent: an encoded body was refused above
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise self.too_large(max_bytes)
            if time.monotonic() > self.give_up:
                raise self.too_slow()
            chunks.append(chunk)
            if on_bytes is not None:
                on_bytes(size)
        return b"".join(chunks)

    def too_large(self, max_bytes: int) -> AnswerRefused:
        return AnswerRefused(f"{self.url}: {self.what} over its bound of {max_bytes} bytes")

    def too_slow(self) -> AnswerRefused:
        return AnswerRefused(f"{self.url}: {self.what} not complete within {self.max_seconds:g} s")


def deadline_transport() -> httpx.HTTPTransport:
    """httpx's own transport, with every socket wait cut at the deadline of the transfer
    `fetch` is doing in the calling thread (elsewhere, the client's timeouts as they are)."""
    transport = httpx.HTTPTransport()
    # httpx offers no option for httpcore's network backend; its connection pool holds one.
    pool = transport._pool
    pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport


def _until_deadline(timeout: float | None) -> float | None:
    """`timeout`, shortened to what is left of the current transfer's time."""
    give_up = _give_up.get()
    if give_up is None:
        return timeout
    # A socket timeout of 0 would mean non-blocking, not "time is up": wait a millisecond.
    left = max(give_up - time.monotonic(), 0.001)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _until_deadline(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _until_deadline(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _until_deadline(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _until_deadline(timeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _until_deadline(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)
