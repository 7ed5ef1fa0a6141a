"""The client SDK: submit a job to a node, wait for it, fetch outputs checked against their
digests, fetch the signed trace and verify it locally.

    client = Client("http://127.0.0.1:8700", trusted_keys=[node_public_key])
    job = client.submit("model.hlo", [x, w])
    job.wait(timeout=60)
    outputs = job.outputs()
    report = client.verify(job.trace(), "model.hlo", [x, w])
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from attest import Statement
from attest.digests import sha256_hex, tensor_digest
from attest.verify import TrustedKeys
from compiler.hlo.dtypes import from_name
from node.tensors import npy_bytes
from node.trace import VerifyReport, parse_envelope, verify_trace

TensorLike = np.ndarray | str | Path


class NodeError(RuntimeError):
    """The node refused a request; `status` is the HTTP status, `detail` its message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"node answered {status}: {detail}")
        self.status = status
        self.detail = detail


class JobFailed(RuntimeError):
    """The job ended `failed`; the message is the node's error."""


class IntegrityError(RuntimeError):
    """Bytes from the node that do not match the digest they were asked for."""


def _module_bytes(module: str | Path | bytes) -> bytes:
    """Module text, or the file it names (a Path, or a one-line str naming an existing file)."""
    if isinstance(module, bytes):
        return module
    if isinstance(module, Path) or ("\n" not in module and Path(module).is_file()):
        return Path(module).read_bytes()
    return module.encode("utf-8")


def _tensor_bytes(tensor: TensorLike) -> bytes:
    if isinstance(tensor, np.ndarray):
        return npy_bytes(tensor)
    return Path(tensor).read_bytes()


def _as_array(tensor: TensorLike) -> np.ndarray:
    if isinstance(tensor, np.ndarray):
        return tensor
    return np.load(Path(tensor), allow_pickle=False)


@dataclass
class Job:
    """A job on a node, as last seen (`info` is the node's JSON for it)."""

    client: Client
    id: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return str(self.info.get("state", "unknown"))

    def refresh(self) -> Job:
        """Fetches the job's current state from the node."""
        self.info = self.client._json("GET", f"/v1/jobs/{self.id}")
        return self

    def wait(
        self,
        timeout: float | None = None,
        progress: Callable[[Job], None] | None = None,
        poll_seconds: float = 0.05,
    ) -> Job:
        """Polls until the job is done; `progress` is called on every state change. Raises
        JobFailed when it failed and TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = None
        delay = poll_seconds
        while True:
            self.refresh()
            if self.state != seen:
                seen = self.state
                if progress is not None:
                    progress(self)
            if self.state == "done":
                return self
            if self.state == "failed":
                raise JobFailed(f"job {self.id} failed: {self.info.get('error')}")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} still {self.state} after {timeout} s")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)  # quick for small jobs, gentle for long ones

    def trace(self) -> str:
        """The signed DSSE envelope (JSON text) of the done job."""
        return self.client._request("GET", f"/v1/jobs/{self.id}/trace").text

    def outputs(self) -> list[np.ndarray]:
        """The output arrays, each checked twice: its bytes against the blob digest, and the
        array against the tensor digest the trace records (so bfloat16 comes back typed)."""
        if self.state != "done":
            self.refresh()
        statement = Statement.from_json_bytes(parse_envelope(self.trace()).payload)
        records = statement.predicate.deterministic.outputs
        digests = list(self.info.get("output_digests", []))
        if len(digests) != len(records):
            raise IntegrityError(f"job {self.id}: {len(digests)} output blobs, the trace records {len(records)}")
        arrays = []
        for digest, record in zip(digests, records, strict=True):
            array = np.load(io.BytesIO(self.client.get_blob(digest)), allow_pickle=False)
            dtype = from_name(record.dtype).numpy
            if array.dtype != dtype and array.dtype.itemsize == dtype.itemsize:
                array = array.view(dtype)  # bfloat16 round-trips .npy as raw 2-byte records
            if tensor_digest(array) != record.digest:
                raise IntegrityError(f"job {self.id}: {record.name} does not match the trace's digest")
            arrays.append(array)
        return arrays


class Client:
    """An HTTP client for one node. `trusted_keys` (public keys) are what `verify` checks
    signatures against by default."""

    def __init__(
        self,
        url: str,
        *,
        trusted_keys: TrustedKeys | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`transport` replaces the network (httpx.MockTransport in tests, or an ASGI app)."""
        self.url = url.rstrip("/")
        self.trusted_keys = trusted_keys
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                detail = str(response.json().get("detail"))
            except ValueError:
                detail = response.text
            raise NodeError(response.status_code, detail)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return self._request(method, path, **kwargs).json()

    def put_blob(self, data: bytes) -> str:
        """Uploads `data`; returns its digest."""
        digest = sha256_hex(data)
        self._request("PUT", f"/v1/blobs/{digest}", content=data)
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The bytes stored under `digest`, checked against it."""
        data = self._request("GET", f"/v1/blobs/{digest}").content
        if sha256_hex(data) != digest:
            raise IntegrityError(f"blob {digest}: the node sent bytes with another digest")
        return data

    def submit(
        self, module_text_or_path: str | Path | bytes, inputs: Sequence[TensorLike] = (), redundancy: int = 1
    ) -> Job:
        """Uploads the inputs (arrays or .npy paths) and queues the job with the module
        inline, so a refused job leaves nothing on the node but the input blobs."""
        digests = [self.put_blob(_tensor_bytes(t)) for t in inputs]
        module = _module_bytes(module_text_or_path)
        try:
            text = module.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("module: not UTF-8 text") from None
        info = self._json("POST", "/v1/jobs", json={"module": text, "inputs": digests, "redundancy": redundancy})
        return Job(self, info["id"], info)

    def job(self, job_id: str) -> Job:
        """A job by id (its current state fetched)."""
        return Job(self, job_id).refresh()

    def verify(
        self,
        trace: str | bytes,
        module: str | Path | bytes,
        inputs: Sequence[TensorLike] = (),
        *,
        trusted_keys: TrustedKeys | None = None,
        threads: int = 1,
    ) -> VerifyReport:
        """Verifies `trace` here, without trusting the node: signatures against the trusted
        keys, then recompiling and re-executing `module` on `inputs` (node.trace.verify_trace)."""
        keys = trusted_keys if trusted_keys is not None else self.trusted_keys
        if keys is None:
            raise ValueError("verify needs trusted_keys (the node's public key)")
        return verify_trace(
            trace, keys, module_source=_module_bytes(module),
            inputs=[_as_array(t) for t in inputs], threads=threads,
        )  # fmt: skip
