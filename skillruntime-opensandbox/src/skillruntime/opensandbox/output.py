"""Bounded capture of one command output stream rebuilt from OpenSandbox line events.

execd sends output one line per event with the line terminator stripped, and a blank line as the
text ``"\\n"``. :class:`LineOutput` turns the events back into bytes: every line is followed by a
newline, except that the newline after the *last* line is held back until the end, where
:meth:`LineOutput.finish` decides whether it belongs to the output (see :mod:`.commands` for the
trailing-newline rule). Only the head and the tail of a stream are kept (``limit`` bytes in all),
so memory stays bounded whatever a command prints.
"""

from __future__ import annotations

from skillruntime.core.output import HeadTailBuffer

__all__ = ["LineOutput"]


class LineOutput:
    """One output stream rebuilt from line events into a bounded :class:`HeadTailBuffer`."""

    __slots__ = ("_buffer", "_pending_newline")

    def __init__(self, limit: int) -> None:
        self._buffer = HeadTailBuffer(limit)
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
