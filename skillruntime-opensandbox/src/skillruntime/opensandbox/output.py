"""Bounded capture of one command output stream rebuilt from OpenSandbox line events.

execd sends output one line per event with the line terminator stripped, and a blank line as the
text ``"\\n"``. :class:`LineOutput` turns the events back into bytes: every line is followed by a
newline, except that the newline after the *last* line is held back until the end, where
:meth:`LineOutput.finish` decides whether it belongs to the output (see :mod:`.commands` for the
trailing-newline rule). Only the head and the tail of a stream are kept (``limit`` bytes in all),
so memory stays bounded whatever a command prints.
"""

from __future__ import annotations

__all__ = ["HeadTail", "LineOutput", "truncation_marker"]


def truncation_marker(dropped: int) -> str:
    """The text put between the kept head and tail of a truncated stream."""
    return f"\n... [{dropped} bytes truncated] ...\n"


def _cut_incomplete_suffix(data: bytes) -> bytes:
    """``data`` without a UTF-8 sequence cut at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue
        if byte < 0x80:
            return data
        needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return data[:-back] if back < needed else data
    return data


def _cut_continuation_prefix(data: bytes) -> bytes:
    """``data`` without UTF-8 continuation bytes at its start."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


class HeadTail:
    """Keeps the first ``limit // 2`` and the last ``limit - limit // 2`` bytes fed to it."""

    __slots__ = ("_head", "_head_limit", "_tail", "_tail_limit", "total")

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError("limit must be at least 2 bytes")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    @property
    def truncated(self) -> bool:
        """True when more bytes were fed than are kept."""
        return self.total > self._head_limit + self._tail_limit

    def feed(self, data: bytes) -> None:
        """Append ``data`` to the stream."""
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: -self._tail_limit]

    def text(self) -> tuple[str, bool]:
        """``(decoded text, truncated)``; a marker stating the dropped byte count replaces the
        middle of a truncated stream."""
        if not self.truncated:
            return (bytes(self._head) + bytes(self._tail)).decode("utf-8", "replace"), False
        head = _cut_incomplete_suffix(bytes(self._head))
        tail = _cut_continuation_prefix(bytes(self._tail[-self._tail_limit :]))
        dropped = self.total - len(head) - len(tail)
        text = (
            head.decode("utf-8", "replace")
            + truncation_marker(dropped)
            + tail.decode("utf-8", "replace")
        )
        return text, True


class LineOutput:
    """One output stream rebuilt from line events into a :class:`HeadTail` buffer."""

    __slots__ = ("_buffer", "_pending_newline")

    def __init__(self, limit: int) -> None:
        self._buffer = HeadTail(limit)
        self._pending_newline = False

    def add_line(self, text: str) -> None:
        """Add one line event (``"\\n"`` is a blank line)."""
        if self._pending_newline:
            self._buffer.feed(b"\n")
        if text != "\n":
            self._buffer.feed(text.encode("utf-8", "replace"))
        self._pending_newline = True

    def finish(self, *, drop_final_newline: bool) -> tuple[str, bool]:
        """Return ``(text, truncated)``; the newline after the last line is kept unless
        ``drop_final_newline``."""
        if self._pending_newline and not drop_final_newline:
            self._buffer.feed(b"\n")
        self._pending_newline = False
        return self._buffer.text()
