"""The upload form of ``POST /v1/file/upload``: text fields in memory, file parts on disk.

Parsing is :func:`doubles._multipart.parse_multipart` (streaming, bounded memory); this module
collects its parts into a :class:`FormData`.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import IO

from doubles._multipart import ByteSource, MultipartError, disposition_params, parse_multipart
from doubles._multipart import boundary_of as _strict_boundary_of

__all__ = ["FilePart", "FormData", "MultipartError", "boundary_of", "read_form"]

_CHUNK = 65536
_MAX_FIELD = 64 * 1024


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
    try:
        return _strict_boundary_of(content_type)
    except MultipartError:
        return None


class _Bounded:
    """``read(n)`` over the first ``length`` bytes of a stream."""

    def __init__(self, stream: ByteSource, length: int) -> None:
        self.stream = stream
        self.remaining = length

    def read(self, size: int) -> bytes:
        if self.remaining <= 0:
            return b""
        chunk = self.stream.read(min(size, self.remaining))
        self.remaining = self.remaining - len(chunk) if chunk else 0
        return chunk


class _FileSink:
    """Spools a file part to a temporary file; registers it in the form when closed."""

    def __init__(self, form: FormData, name: str, filename: str, spool_dir: str) -> None:
        self.form = form
        spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115 - owned by the form
        self.part = FilePart(name, filename, spool, 0)

    def write(self, data: bytes) -> None:
        self.part.file.write(data)
        self.part.size += len(data)

    def close(self) -> None:
        self.part.file.seek(0)
        old = self.form.files.pop(self.part.name, None)
        if old is not None:
            old.file.close()
        self.form.files[self.part.name] = self.part


class _FieldSink:
    """Collects a text field (at most 64 KiB); stores it in the form when closed."""

    def __init__(self, form: FormData, name: str) -> None:
        self.form = form
        self.name = name
        self.value = bytearray()

    def write(self, data: bytes) -> None:
        self.value += data
        if len(self.value) > _MAX_FIELD:
            raise MultipartError("multipart section too large")

    def close(self) -> None:
        self.form.fields[self.name] = self.value.decode("utf-8", "replace")


def read_form(stream: ByteSource, length: int, boundary: str, spool_dir: str) -> FormData:
    """Read a whole multipart body of ``length`` bytes from ``stream``.

    File parts (those with a ``filename``) are copied to temporary files in ``spool_dir``;
    other parts must stay under 64 KiB. Raises :class:`MultipartError` on a malformed body.
    """
    source = _Bounded(stream, length)
    form = FormData()

    def open_part(headers: dict[str, str]) -> _FileSink | _FieldSink:
        params = disposition_params(headers.get("content-disposition", ""))
        name = params.get("name")
        if name is None:
            raise MultipartError("part without a name")
        filename = params.get("filename")
        if filename is not None:
            return _FileSink(form, name, filename, spool_dir)
        return _FieldSink(form, name)

    try:
        parse_multipart(source, boundary, open_part)
        while source.read(_CHUNK):  # the epilogue
            pass
    except BaseException:
        form.close()
        raise
    return form
