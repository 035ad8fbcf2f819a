"""Pure pieces of the backend: the line window of ``read``, the replacement of ``edit``, the
literal search of ``grep`` and the result messages, shared by the sync and the async methods.

Nothing here does I/O. The rules follow deepagents' own sandbox backend (``BaseSandbox`` of the
``deepagents`` release this distribution is tested with) so an agent sees the same results,
messages and pagination whichever backend serves it.
"""

from __future__ import annotations

import base64
import codecs
import posixpath
from dataclasses import dataclass, field
from typing import Final

from deepagents.backends.protocol import EditResult, FileData, GrepMatch, ReadResult

from skillruntime.core.errors import SkillRuntimeError, file_error_code

__all__ = [
    "BINARY_EXTENSIONS",
    "DEEPAGENTS_ERROR_CODES",
    "EMPTY_CONTENT_WARNING",
    "EMPTY_OLD_STRING_ERROR",
    "MAX_BINARY_BYTES",
    "MAX_LINE_COUNT_BYTES",
    "MAX_OUTPUT_BYTES",
    "TRUNCATION_MSG",
    "LineWindow",
    "binary_read",
    "binary_too_large",
    "edit_failure",
    "error_code",
    "find_literal",
    "looks_binary",
    "replace_text",
]

MAX_BINARY_BYTES: Final = 500 * 1024
"""Largest binary file ``read`` returns (base64); larger ones are an error, as in deepagents."""

MAX_OUTPUT_BYTES: Final = 500 * 1024
"""Largest text page ``read`` returns; a longer page is cut and :data:`TRUNCATION_MSG` added."""

MAX_LINE_COUNT_BYTES: Final = 1024 * 1024
"""Files up to this size are read to the end to report ``total_lines``; larger ones stop at the
page (``total_lines`` is then unknown unless the page reached the end)."""

TRUNCATION_MSG: Final = (
    "\n\n[Output was truncated due to size limits. "
    "This paginated read result exceeded the sandbox stdout limit. "
    "Continue reading with a larger offset or smaller limit to inspect the rest of the file.]"
)

EMPTY_CONTENT_WARNING: Final = "System reminder: File exists but has empty contents"
EMPTY_OLD_STRING_ERROR: Final = (
    "Error: old_string cannot be empty. Provide the exact text to replace."
)

BINARY_PREFIX_BYTES: Final = 8192
"""A file whose first bytes are not UTF-8 is binary (read as base64)."""

DEEPAGENTS_ERROR_CODES: Final = frozenset(
    {"file_not_found", "permission_denied", "is_directory", "invalid_path"}
)
"""deepagents' standard ``FileOperationError`` codes."""

BINARY_EXTENSIONS: Final = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".tif", ".tiff", ".heic",
        ".pdf", ".mp3", ".wav", ".ogg", ".flac", ".m4a", ".aac",
        ".mp4", ".mov", ".avi", ".mkv", ".webm", ".m4v", ".mpeg", ".mpg",
    }
)  # fmt: skip
"""Extensions read as binary whatever their first bytes (images, documents, audio, video)."""


def error_code(error: BaseException) -> str:
    """deepagents' code for a skillruntime error: the typed error's stable code when deepagents
    has one (``file_not_found``, ``is_directory``, ``permission_denied``, ``invalid_path``), else
    skillruntime's own (``file_too_large``, ``file_error``) or, for a transport failure, its
    message (never file content or secrets, by the core's error contract)."""
    code = file_error_code(error)
    if code is not None:
        return code
    if isinstance(error, ValueError):  # a NUL byte or a malformed path refused before any call
        return "invalid_path"
    if isinstance(error, SkillRuntimeError):
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


def looks_binary(path: str, prefix: bytes) -> bool:
    """True when ``path`` is read as binary: a binary extension, or a first
    :data:`BINARY_PREFIX_BYTES` bytes that are not UTF-8 (a cut multi-byte character at the end
    of the prefix is fine)."""
    if posixpath.splitext(path)[1].lower() in BINARY_EXTENSIONS:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(prefix[:BINARY_PREFIX_BYTES], final=False)
    except UnicodeDecodeError:
        return True
    return False


def binary_read(path: str, data: bytes) -> ReadResult:
    """The ``read`` result of a binary file's bytes (base64, no pagination)."""
    return ReadResult(
        file_data=FileData(content=base64.b64encode(data).decode("ascii"), encoding="base64")
    )


def binary_too_large(path: str) -> ReadResult:
    """The ``read`` error of a binary file over :data:`MAX_BINARY_BYTES`."""
    return ReadResult(
        error=f"File '{path}': Binary file exceeds maximum preview size of {MAX_BINARY_BYTES} bytes"
    )


@dataclass
class LineWindow:
    """The page ``offset``/``limit`` of a UTF-8 text file, fed its bytes chunk by chunk.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (universal newlines) and are returned without
    their ending, joined with ``\\n``. Memory holds the page and one chunk, whatever the file
    size. :meth:`feed` returns ``True`` once nothing more is needed: the page is full and either
    the file is larger than :data:`MAX_LINE_COUNT_BYTES` (``total_lines`` stays unknown) or
    every line has been counted.
    """

    offset: int
    limit: int
    size: int
    lines_seen: int = 0
    returned: int = 0
    used_bytes: int = 0
    truncated: bool = False
    at_eof: bool = False
    parts: list[str] = field(default_factory=list)
    _pending: str = ""
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=codecs.getincrementaldecoder("utf-8")
    )

    @property
    def _page_full(self) -> bool:
        return self.truncated or self.returned >= self.limit

    def feed(self, chunk: bytes) -> bool:
        """Consume the next chunk (raises :class:`UnicodeDecodeError` for non-UTF-8 text)."""
        text = self._pending + self._decoder.decode(chunk, final=False)
        # A trailing "\r" may be the first half of "\r\n": keep it for the next chunk.
        keep_cr = text.endswith("\r")
        if keep_cr:
            text = text[:-1]
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        self._pending = lines.pop() + ("\r" if keep_cr else "")
        for line in lines:
            self._line(line)
        return self._page_full and (self.size > MAX_LINE_COUNT_BYTES)

    def finish(self) -> None:
        """The stream ended: the last line without an ending counts as a line."""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        tail = tail.replace("\r\n", "\n").replace("\r", "\n")
        lines = tail.split("\n")
        last = lines.pop()
        for line in lines:
            self._line(line)
        if last:
            self._line(last)
        self.at_eof = True

    def stopped_at_end(self) -> bool:
        """True when the stream was cut after the page with nothing left undecoded (the page ended
        exactly at the end of a file of ``consumed`` bytes)."""
        return not self._pending

    def _line(self, line: str) -> None:
        self.lines_seen += 1
        if self.lines_seen <= self.offset or self._page_full:
            return
        piece = line if self.returned == 0 else "\n" + line
        size = len(piece.encode("utf-8"))
        budget = MAX_OUTPUT_BYTES - len(TRUNCATION_MSG.encode("utf-8"))
        if self.used_bytes + size > budget:
            self.truncated = True
            room = budget - self.used_bytes
            if room > 0:
                prefix = piece.encode("utf-8")[:room].decode("utf-8", errors="ignore")
                if prefix:
                    self.parts.append(prefix)
                    self.used_bytes += len(prefix.encode("utf-8"))
            return
        self.parts.append(piece)
        self.used_bytes += size
        self.returned += 1

    def result(self, path: str) -> ReadResult:
        """The ``read`` result (after :meth:`finish`, or after :meth:`feed` returned ``True``)."""
        if self.returned == 0 and not self.truncated:
            return ReadResult(
                error=f"File '{path}': Line offset {self.offset} exceeds file length "
                f"({self.lines_seen} lines)"
            )
        total: int | None = self.lines_seen if self.at_eof else None
        returned = self.returned if self.returned or not self.truncated else 1
        end_line = self.offset + returned
        if total is not None:
            total = max(total, end_line)
            next_offset = end_line if end_line < total else None
        else:
            next_offset = end_line
        text = "".join(self.parts) + (TRUNCATION_MSG if self.truncated else "")
        return ReadResult(
            file_data=FileData(content=text, encoding="utf-8"),
            total_lines=total,
            start_line=self.offset + 1,
            end_line=end_line,
            next_offset=next_offset,
        )


def replace_text(text: str, old: str, new: str, *, replace_all: bool) -> tuple[str, int] | str:
    """Replace ``old`` by ``new`` in ``text``: ``(new_text, occurrences)`` or an error code
    (``string_not_found``, ``multiple_occurrences``).

    As in deepagents: ``old`` is tried as given, then with CRLF endings, then with LF endings
    (``read`` shows CRLF files with LF endings); the first form found decides, and ``new`` is
    given the same endings so the file keeps its style.
    """
    old_crlf = old.replace("\r\n", "\n").replace("\n", "\r\n")
    old_lf = old.replace("\r\n", "\n")
    new_crlf = new.replace("\r\n", "\n").replace("\n", "\r\n")
    new_lf = new.replace("\r\n", "\n")
    for candidate_old, candidate_new in ((old, new), (old_crlf, new_crlf), (old_lf, new_lf)):
        count = text.count(candidate_old)
        if count == 0:
            continue
        if count > 1 and not replace_all:
            return "multiple_occurrences"
        if replace_all:
            return text.replace(candidate_old, candidate_new), count
        return text.replace(candidate_old, candidate_new, 1), 1
    return "string_not_found"


def edit_failure(code: str, path: str, old: str) -> EditResult:
    """deepagents' ``edit`` error message for ``code``."""
    messages = {
        "file_not_found": f"Error: File '{path}' not found",
        "permission_denied": f"Error: Permission denied editing file '{path}'",
        "not_a_file": f"Error: '{path}' is not a regular file",
        "is_directory": f"Error: '{path}' is not a regular file",
        "not_a_text_file": f"Error: File '{path}' is not a text file",
        "string_not_found": f"Error: String not found in file: '{old}'",
        "multiple_occurrences": (
            f"Error: String '{old}' appears multiple times. "
            "Use replace_all=True to replace all occurrences."
        ),
    }
    return EditResult(error=messages.get(code, f"Error editing file '{path}': {code}"))


def find_literal(path: str, text: str, pattern: str, matches: list[GrepMatch], cap: int) -> bool:
    """Append the lines of ``text`` that contain ``pattern`` (1-based line numbers, the line
    without its ending) until ``matches`` holds ``cap`` entries; ``True`` when it is full."""
    for number, line in enumerate(text.split("\n"), start=1):
        if pattern in line:
            matches.append({"path": path, "line": number, "text": line.removesuffix("\r")})
            if len(matches) >= cap:
                return True
    return False
