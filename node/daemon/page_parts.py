"""The pieces every page of the node is made of (node/daemon/pages.py): escaped text, tables,
digests that link to what they name, and times said the way people say them ("2 min ago",
"in 23 s"), with the exact UTC time on hover."""

from __future__ import annotations

import html
import time

# Where each kind of digest leads: a blob's bytes (a module, an input, an output, a trace).
BLOB_URL = "/v1/blobs/{digest}"


def e(text: object) -> str:
    """`text` escaped for HTML (attribute values too)."""
    return html.escape(str(text), quote=True)


def table(columns: list[str], rows: list[list[str]], css: str = "") -> str:
    """A table of HTML cells: with `columns`, a header row; without, a key/value table whose
    first cell in each row is its heading."""
    head = "<tr>" + "".join(f"<th>{e(c)}</th>" for c in columns) + "</tr>" if columns else ""
    lines = []
    for row in rows:
        cells = [f"<th>{cell}</th>" if not columns and i == 0 else f"<td>{cell}</td>" for i, cell in enumerate(row)]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    kind = f" class={css}" if css else ""
    return f"<table{kind}>{head}{''.join(lines)}</table>"


def badge(name: str) -> str:
    """A state in words, coloured by the style sheet's class of that name."""
    return f"<span class='state {e(name)}'>{e(name)}</span>"


def digest(value: str, href: str | None = None) -> str:
    """A digest in monospace, a link to `href` when given."""
    text = f"<span class=digest>{e(value)}</span>"
    return f"<a href='{e(href)}'>{text}</a>" if href else text


def blob(value: str) -> str:
    """A digest of bytes this node may hold, linked to them (`GET /v1/blobs/{digest}`)."""
    return digest(value, BLOB_URL.format(digest=value))


def code(text: object) -> str:
    return f"<code>{e(text)}</code>"


def note(text: str) -> str:
    """Secondary words beside a value (`text` is HTML)."""
    return f" <span class=note>{text}</span>"


def utc(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))


def duration(seconds: float) -> str:
    """A length of time as people say it: `0.42 s`, `23 s`, `2 min 5 s`, `3 h 10 min`, `2 days`."""
    if seconds < 10:
        return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min" + (f" {rest} s" if rest and minutes < 10 else "")
    if whole < 86400:
        hours, minutes = divmod(whole // 60, 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days = whole // 86400
    return f"{days} day" + ("s" if days != 1 else "")


def relative(moment: float, now: float) -> str:
    """`moment` from `now`: "in 23 s", "2 min ago", "just now"."""
    gap = moment - now
    if abs(gap) < 1:
        return "just now"
    return f"in {duration(gap)}" if gap > 0 else f"{duration(-gap)} ago"


def when(moment: float, now: float, before: str = "") -> str:
    """A `<time>` said relative to `now` (prefixed with `before`, e.g. "finalized "), its exact
    UTC time on hover and in its datetime attribute."""
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
    return f"<time datetime={iso} title='{utc(moment)}'>{e(before)}{relative(moment, now)}</time>"
