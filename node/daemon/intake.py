"""What a request must pass before the node reads a byte of its body: the ASGI layer in front
of the API (node/daemon/api.py).

For each route that stores or computes something (`INTAKE_ROUTES`) it checks, from the
headers alone: the credentials and the token's rate (node.daemon.auth.Gate.admit), the
quota the request would need (a job for `POST /v1/jobs`, the declared bytes for a blob),
and the route's body limit (`Content-Length`). A refusal is answered at once, the body
unread. The token admitted is handed to the route in `scope["state"]["token"]`. The token
database failing (a full disk) is a 507 or 503 with `Retry-After`, as on the routes.

Every other route, and one whose body limit is 0, takes no body: a request to one that
declares a body (`Content-Length` past 0, or `Transfer-Encoding`) is refused (413) before a
byte of it is read, and its connection closed, so the server does not read on to the end of
a body nobody wants.

Bodies are then counted as they arrive (a chunked one declares no length), and a JSON body is
read in full (it is within its limit by then) and its nesting checked before anything parses
it: a job request is an object of lists of strings, and JSON nested past `MAX_JSON_DEPTH` is
refused with a 400 naming the depth, so no parser recurses deeper than that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from node.daemon.auth import Gate, Refused, Token
from node.sqlite import STORAGE_RETRY_AFTER_S, StorageError

# A job request is {"inputs": [...]}: depth 2. Room for clients that wrap it, and no more.
MAX_JSON_DEPTH = 32

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# A JSON string (with its escapes), or one bracket outside any string.
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_depth(data: bytes, limit: int) -> int:
    """The deepest nesting of arrays and objects in the JSON text `data`, counted up to
    `limit + 1` (the scan stops there). Brackets inside strings do not count; the text need
    not be valid JSON (the parser says what else is wrong with it)."""
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


@dataclass(frozen=True)
class IntakeRoute:
    """A route that stores or computes: its method, path pattern and body limit, whether its
    body is JSON, and the jobs one request of it uses of a token's quota."""

    method: str
    path: re.Pattern[str]
    body_limit: int
    json_body: bool = False
    jobs: int = 0

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and self.path.fullmatch(path) is not None


class Intake:
    """The ASGI middleware (module docstring). Plain ASGI: Starlette's BaseHTTPMiddleware costs
    more per request than a small job's whole handling."""

    def __init__(self, app: Any, gate: Gate, routes: list[IntakeRoute]) -> None:
        self.app = app
        self.gate = gate
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = next((r for r in self.routes if r.matches(scope["method"], scope["path"])), None)
        headers = dict(scope["headers"])
        declared_text = headers.get(b"content-length", b"")
        declared = int(declared_text) if declared_text.isdigit() else None
        if (route is None or route.body_limit == 0) and (declared or b"transfer-encoding" in headers):
            # Answered before the body is read; the connection closes after the answer
            # (_refuse), where answering without it would make the server read it all.
            await _refuse(send, 413, f"this route ({scope['method']}) takes no request body")
            return
        if route is None:
            await self.app(scope, receive, send)
            return
        try:
            token = self.gate.admit(_text(headers.get(b"authorization")))
            self.gate.may_use(token, jobs=route.jobs, nbytes=0 if route.json_body else declared or 0)
        except Refused as refused:
            await _refuse(send, refused.status, str(refused), refusal_headers(refused))
            return
        except StorageError as error:  # the token database's: the node's trouble, as the API says it
            await _refuse(send, error.status, str(error), {"Retry-After": str(STORAGE_RETRY_AFTER_S)})
            return
        scope.setdefault("state", {})["token"] = token
        limit = route.body_limit
        if declared is not None and declared > limit:
            await _refuse(send, 413, f"body of {declared} bytes is over this route's limit ({limit} bytes)")
            return
        if route.json_body:
            body = await _read_body(receive, limit)
            if body is None:
                await _refuse(send, 413, f"body is over this route's limit ({limit} bytes)")
                return
            if json_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
                await _refuse(send, 400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
                return
            await self.app(scope, _replay(body, receive), send)
            return
        await self.app(scope, _counted(receive, limit), send)


def admitted_token(scope_state: dict[str, Any]) -> Token | None:
    """The token the intake admitted for this request (None: the node needs none)."""
    return scope_state.get("token")


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def refusal_headers(refused: Refused) -> dict[str, str]:
    """The headers of a refusal: RFC 6750's challenge on a 401, the wait on a 429."""
    headers = {"WWW-Authenticate": 'Bearer realm="vxla"'} if refused.status == 401 else {}
    if refused.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(refused.retry_after_s + 0.5)))
    return headers


async def _refuse(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    """A JSON `{"detail": ...}` answer; the connection is closed after it, since the body
    the client may still be sending is never read."""
    body = json.dumps({"detail": detail}).encode()
    extra = [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)  # the client went away: the app sees a short body
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app `body` in one message, then what the server says next
    (the body is read: that is a disconnect, when it comes)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class BodyTooLarge(Exception):
    """A body that passed its route's limit while it arrived (no Content-Length to refuse it
    by): the API answers 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"body is over this route's limit ({limit} bytes)")
        self.limit = limit


def _counted(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> dict[str, Any]:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return counted
