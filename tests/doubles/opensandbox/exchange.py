"""One HTTP exchange as the route functions of the double see it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from doubles._http import BodyReader, ChunkedWriter


@dataclass
class Exchange:
    """Request data plus response helpers bound to the handler's socket."""

    handler: BaseHTTPRequestHandler
    method: str
    path: str
    query: dict[str, list[str]]
    body: BodyReader
    base_url: str
    responded: bool = False
    extra_headers: dict[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        """A request header (case-insensitive)."""
        return self.handler.headers.get(name)

    def param(self, name: str) -> str | None:
        """First value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else None

    def params(self, name: str) -> list[str]:
        """All values of a repeated query parameter."""
        return list(self.query.get(name, []))

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.responded = True
        h = self.handler
        h.send_response(status)
        for key, value in {**self.extra_headers, **headers}.items():
            h.send_header(key, value)
        if not self.body.done:
            # The body was not (fully) read: the connection cannot be reused safely.
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()

    def send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        """A complete response with ``Content-Length``."""
        self._start(
            status,
            {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})},
        )
        if self.method != "HEAD" and data:
            self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """A JSON response."""
        self.send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

    def send_empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        """A response without a body (``Content-Length: 0``)."""
        self._start(status, {"Content-Length": "0", **(headers or {})})
        self.handler.wfile.flush()

    def start_chunked(self, status: int, content_type: str) -> ChunkedWriter:
        """Begin a chunked streaming response."""
        self._start(status, {"Content-Type": content_type, "Transfer-Encoding": "chunked"})
        return ChunkedWriter(self.handler.wfile)

    def start_fixed(
        self, status: int, content_type: str, length: int, headers: dict[str, str]
    ) -> Any:
        """Begin a response of known length; the caller writes exactly ``length`` bytes."""
        self._start(
            status, {"Content-Type": content_type, "Content-Length": str(length), **headers}
        )
        return self.handler.wfile
