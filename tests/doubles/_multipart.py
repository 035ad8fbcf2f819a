"""Streaming ``multipart/form-data`` parser with bounded memory, shared by the doubles.

Upload endpoints receive bodies of any size (OpenSandbox execd, in direct mode, as a chunked
body of unknown length). This parser reads the body in blocks and hands each part's bytes to
a sink as they arrive, so a multi-gigabyte upload never sits in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

BLOCK = 64 * 1024
MAX_HEADER_BYTES = 16 * 1024


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data."""


class ByteSource(Protocol):
    """Anything with ``read(n) -> bytes`` returning ``b""`` at the end."""

    def read(self, size: int) -> bytes: ...


class PartSink(Protocol):
    """Receives one part's bytes."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


def boundary_of(content_type: str) -> str:
    """Extract the boundary parameter of a ``multipart/form-data`` content type."""
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "multipart/form-data":
        raise MultipartError(f"content type is not multipart/form-data: {media.strip()!r}")
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "boundary" and value:
            return value.strip().strip('"')
    raise MultipartError("multipart/form-data without a boundary")


def parse_headers(raw: bytes) -> dict[str, str]:
    """Parse part headers into a lower-cased dict."""
    headers: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").split("\r\n"):
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise MultipartError(f"malformed part header line: {line!r}")
        headers[name.strip().lower()] = value.strip()
    return headers


def disposition_params(value: str) -> dict[str, str]:
    """Parameters of a ``Content-Disposition`` header (``name``, ``filename``)."""
    params: dict[str, str] = {}
    for item in value.split(";")[1:]:
        key, _, val = item.strip().partition("=")
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] == '"':
            val = val[1:-1]
        params[key.lower()] = val
    return params


def parse_multipart(
    source: ByteSource, boundary: str, open_part: Callable[[dict[str, str]], PartSink]
) -> int:
    """Parse the whole body, calling ``open_part(headers)`` per part; return the part count.

    Raises :class:`MultipartError` on a malformed body (missing boundary, truncated part,
    oversized headers). The sink of a part being written when the error is found is closed.
    """
    opening = b"--" + boundary.encode()
    delimiter = b"\r\n" + opening
    buffer = bytearray()
    eof = False

    def fill() -> bool:
        nonlocal eof
        if eof:
            return False
        chunk = source.read(BLOCK)
        if not chunk:
            eof = True
            return False
        buffer.extend(chunk)
        return True

    # Preamble up to and including the first boundary line.
    while True:
        index = buffer.find(opening)
        if index >= 0 and (index == 0 or buffer[index - 2 : index] == b"\r\n"):
            del buffer[: index + len(opening)]
            break
        if len(buffer) > MAX_HEADER_BYTES:
            del buffer[: -len(opening)]
        if not fill():
            raise MultipartError("multipart body has no opening boundary")

    parts = 0
    while True:
        while len(buffer) < 2 and fill():
            pass
        if buffer[:2] == b"--":
            return parts
        if buffer[:2] != b"\r\n":
            raise MultipartError("malformed boundary line")
        del buffer[:2]
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buffer) > MAX_HEADER_BYTES:
                raise MultipartError("part headers too large")
            if not fill():
                raise MultipartError("truncated part headers")
        headers = parse_headers(bytes(buffer[:end]))
        del buffer[: end + 4]
        sink = open_part(headers)
        parts += 1
        try:
            while True:
                index = buffer.find(delimiter)
                if index >= 0:
                    if index:
                        sink.write(bytes(buffer[:index]))
                    del buffer[: index + len(delimiter)]
                    break
                keep = len(delimiter) - 1
                if len(buffer) > keep:
                    sink.write(bytes(buffer[:-keep]))
                    del buffer[:-keep]
                if not fill():
                    raise MultipartError("truncated multipart body")
        finally:
            sink.close()
