"""HTTP plumbing shared by the doubles.

* :class:`BodyReader`: a request body framed by ``Content-Length`` or chunked transfer
  encoding, read in bounded blocks.
* :class:`ChunkedWriter`: a chunked response body, flushed chunk by chunk.
* :class:`BackgroundHTTPServer`: an HTTP server on a loopback port, served from a daemon
  thread (the in-process test servers).
"""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class BodyError(ValueError):
    """The request body is malformed at the transfer level."""


class BodyReader:
    """Reads a request body framed by ``Content-Length`` or ``Transfer-Encoding: chunked``.

    ``read(n)`` returns at most ``n`` bytes and ``b""`` at the end, so consumers stream with
    bounded memory. ``drain()`` discards the rest, which keeps the connection reusable.
    """

    def __init__(self, stream: io.BufferedIOBase, length: int | None, chunked: bool) -> None:
        self._stream = stream
        self._chunked = chunked
        self._remaining = length or 0
        self._chunk_left = 0
        self._done = not chunked and not self._remaining
        self.bytes_read = 0

    @property
    def done(self) -> bool:
        """Whether the whole body has been consumed."""
        return self._done

    def read(self, size: int) -> bytes:
        if self._done or size <= 0:
            return b""
        if not self._chunked:
            data = self._stream.read(min(size, self._remaining))
            if not data:
                raise BodyError("request body truncated")
            self._remaining -= len(data)
            self._done = self._remaining == 0
            self.bytes_read += len(data)
            return data
        if self._chunk_left == 0:
            line = self._stream.readline(1024)
            if not line:
                raise BodyError("chunked body truncated")
            try:
                self._chunk_left = int(line.split(b";")[0].strip(), 16)
            except ValueError as exc:
                raise BodyError("bad chunk size line") from exc
            if self._chunk_left == 0:
                while True:  # trailers until the blank line
                    trailer = self._stream.readline(1024)
                    if trailer in (b"\r\n", b"\n", b""):
                        break
                self._done = True
                return b""
        data = self._stream.read(min(size, self._chunk_left))
        if not data:
            raise BodyError("chunked body truncated")
        self._chunk_left -= len(data)
        if self._chunk_left == 0:
            self._stream.readline(16)  # CRLF after the chunk data
        self.bytes_read += len(data)
        return data

    def read_all(self, limit: int) -> bytes:
        """The whole body, refusing more than ``limit`` bytes."""
        parts: list[bytes] = []
        total = 0
        while True:
            block = self.read(64 * 1024)
            if not block:
                return b"".join(parts)
            total += len(block)
            if total > limit:
                raise BodyError("request body too large")
            parts.append(block)

    def json(self, limit: int = 16 * 1024 * 1024) -> Any:
        """The body parsed as JSON (``None`` for an empty body)."""
        raw = self.read_all(limit)
        if not raw.strip():
            return None
        return json.loads(raw)

    def drain(self) -> None:
        """Discard the rest of the body."""
        while self.read(64 * 1024):
            pass


class ChunkedWriter:
    """Writes a ``Transfer-Encoding: chunked`` response body, flushing every chunk."""

    def __init__(self, stream: io.BufferedIOBase) -> None:
        self._stream = stream

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._stream.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self._stream.flush()

    def finish(self) -> None:
        """The zero-length terminating chunk."""
        self._stream.write(b"0\r\n\r\n")
        self._stream.flush()


class BackgroundHTTPServer:
    """Serves ``handler`` on ``127.0.0.1`` (an ephemeral port) until :meth:`close`.

    One thread per connection (daemon threads, so a hung client never blocks exit);
    ``server_class`` may be a :class:`~http.server.ThreadingHTTPServer` subclass, for example
    one that silences ``handle_error``. ``poll_interval`` bounds how long :meth:`close` waits
    for the serving loop to notice the shutdown.
    """

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        *,
        server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
        poll_interval: float = 0.05,
    ) -> None:
        self._server = server_class(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(poll_interval,), daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving, close the listening socket and wait (bounded) for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
