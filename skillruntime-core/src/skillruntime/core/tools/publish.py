"""The ``publish_file`` tool: stream a runtime file to a :class:`FilePublisher`."""

from __future__ import annotations

import contextlib
import io
import mimetypes
from collections.abc import Iterator
from typing import BinaryIO, cast

from ..files.publishing import FilePublisher, PublishedFile, safe_file_name
from .arguments import PublishFileArguments
from .base import Guard, SkillTool
from .context import ToolContext

__all__ = ["ChunkReader", "content_type_of", "publish_file_tool", "published_text"]

DESCRIPTION = (
    "Publishes an existing regular file from the configured skill runtime and returns a "
    "user-accessible URL. Use it by default as the final delivery step for files the user asked "
    "for, even if publishing was not mentioned, and whenever the user asks to send, give, attach, "
    "open, download or share a file. Internal runtime paths are never the delivery result: give "
    "the user the returned URL. Do not publish temporary or intermediate files, and do not "
    "publish when the user says not to. On an error, fix the problem and retry; never claim a file "
    "was delivered when publishing failed."
)


class ChunkReader(io.RawIOBase):
    """A read-only binary stream over an iterator of byte chunks (bounded memory)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._pending = b""
        self._exhausted = False
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    @property
    def exhausted(self) -> bool:
        """True once the underlying iterator ran out."""
        return self._exhausted and not self._pending

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._exhausted:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                self._exhausted = True
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self.bytes_read += size
        return size


def content_type_of(file_name: str, given: str | None) -> str:
    """The content type of a published file: the one given, else guessed from its name."""
    return (given or "").strip() or mimetypes.guess_type(file_name)[0] or "application/octet-stream"


def published_text(published: PublishedFile, file_name: str, content_type: str, size: int) -> str:
    """The ``publish_file`` tool's answer for a delivered file (shared by both tool sets)."""
    lines = [
        "File published successfully.",
        f"URL: {published.url}",
        f"File name: {file_name}",
        f"Content type: {content_type}",
        f"Size: {size} bytes",
    ]
    if published.expires_at is not None:
        lines.append(f"Expires at: {published.expires_at.isoformat()}")
    return "\n".join(lines)


def publish_file_tool(
    context: ToolContext, publisher: FilePublisher, guard: Guard | None = None
) -> SkillTool:
    """Build the ``publish_file`` tool; ``publisher`` receives the runtime file as a stream."""

    def run(arguments: PublishFileArguments) -> str:
        path = context.resolve(arguments.file_path)
        files = context.file_system()
        info = files.stat(path)
        if info is None:
            return f"Error: File does not exist in {context.name} runtime: {path}"
        if info.is_directory:
            return f"Error: Only regular files can be published: {path}"
        name = safe_file_name(arguments.file_name or path)
        content_type = content_type_of(name, arguments.content_type)
        chunks = files.read_stream(path)
        reader = ChunkReader(chunks)
        with contextlib.closing(chunks), io.BufferedReader(reader) as stream:
            published = publisher.publish(name, cast(BinaryIO, stream), content_type=content_type)
            if not reader.exhausted and stream.read(1):
                return (
                    f"Error: the file publisher returned before reading all of {path}; "
                    "the file was not delivered"
                )
        return published_text(published, name, content_type, reader.bytes_read)

    return SkillTool(
        "publish_file",
        DESCRIPTION,
        PublishFileArguments,
        run,
        guard=guard,
        error_prefix=f"publishing the file from the {context.name} runtime failed",
    )
