"""A small streaming ``multipart/form-data`` reader (bounded memory, file parts go to disk)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import IO

_CHUNK = 65536
_MAX_FIELD = 64 * 1024
_MAX_HEADERS = 16 * 1024


class MultipartError(ValueError):
    """The body is not well-formed multipart data."""


@dataclass
class FilePart:
    """A file part spooled to a temporary file."""

    name: str
    filename: str | None
    file: IO[bytes]
    size: int


@dataclass
class FormData:
    """Parsed form: small text fields in memory, file parts on disk."""

    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, FilePart] = field(default_factory=dict)

    def close(self) -> None:
        for part in self.files.values():
            part.file.close()


def boundary_of(content_type: str | None) -> str | None:
    """The boundary parameter of a ``multipart/form-data`` content type, or None."""
    if not content_type:
        return None
    kind, _, rest = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        return None
    for param in rest.split(";"):
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "boundary" and value:
            return value.strip().strip('"')
    return None


def _disposition(headers: bytes) -> tuple[str | None, str | None]:
    name = filename = None
    for line in headers.decode("utf-8", "replace").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() != "content-disposition":
            continue
        for param in value.split(";")[1:]:
            pkey, _, pval = param.strip().partition("=")
            pval = pval.strip()
            if len(pval) >= 2 and pval[0] == pval[-1] == '"':
                pval = pval[1:-1]
            if pkey.strip().lower() == "name":
                name = pval
            elif pkey.strip().lower() == "filename":
                filename = pval
    return name, filename


class _Reader:
    def __init__(self, stream: IO[bytes], length: int) -> None:
        self.stream = stream
        self.remaining = length
        self.buf = b"\r\n"  # lets the first boundary match the same delimiter as the others

    def fill(self) -> bool:
        if self.remaining <= 0:
            return False
        chunk = self.stream.read(min(_CHUNK, self.remaining))
        if not chunk:
            self.remaining = 0
            return False
        self.remaining -= len(chunk)
        self.buf += chunk
        return True

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self.fill():
                raise MultipartError("truncated multipart body")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until(self, marker: bytes, limit: int) -> bytes:
        while True:
            idx = self.buf.find(marker)
            if idx >= 0:
                out, self.buf = self.buf[:idx], self.buf[idx + len(marker) :]
                return out
            if len(self.buf) > limit:
                raise MultipartError("multipart section too large")
            if not self.fill():
                raise MultipartError("truncated multipart body")

    def copy_until(self, marker: bytes, sink: IO[bytes]) -> int:
        total = 0
        while True:
            idx = self.buf.find(marker)
            if idx >= 0:
                sink.write(self.buf[:idx])
                total += idx
                self.buf = self.buf[idx + len(marker) :]
                return total
            keep = len(marker)
            if len(self.buf) > keep:
                sink.write(self.buf[:-keep])
                total += len(self.buf) - keep
                self.buf = self.buf[-keep:]
            if not self.fill():
                raise MultipartError("truncated multipart body")

    def drain(self) -> None:
        while self.fill():
            self.buf = b""


def read_form(stream: IO[bytes], length: int, boundary: str, spool_dir: str) -> FormData:
    """Read a whole multipart body of ``length`` bytes from ``stream``.

    File parts (those with a ``filename``) are copied to temporary files in ``spool_dir``;
    other parts must stay under 64 KiB.
    """
    delim = b"\r\n--" + boundary.encode("latin-1")
    reader = _Reader(stream, length)
    form = FormData()
    try:
        reader.read_until(delim, _MAX_HEADERS)  # preamble
        while True:
            tail = reader.read_exact(2)
            if tail == b"--":
                reader.drain()
                return form
            if tail != b"\r\n":
                raise MultipartError("malformed boundary line")
            headers = reader.read_until(b"\r\n\r\n", _MAX_HEADERS)
            name, filename = _disposition(headers)
            if name is None:
                raise MultipartError("part without a name")
            if filename is not None:
                sink = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115 - owned by form
                size = reader.copy_until(delim, sink)
                sink.seek(0)
                old = form.files.pop(name, None)
                if old is not None:
                    old.file.close()
                form.files[name] = FilePart(name, filename, sink, size)
            else:
                value = reader.read_until(delim, _MAX_FIELD)
                form.fields[name] = value.decode("utf-8", "replace")
    except BaseException:
        form.close()
        raise
