"""Bounded capture of one output stream: keep the head and the tail, count what is dropped.

Shared by runtimes that collect command output in this process (the local runtime reads pipes
into :class:`HeadTailBuffer`) and by runtimes whose sandbox cuts the output at the source and
sends only its head and tail (the OpenSandbox runtime renders them with :func:`head_tail_text`),
so every runtime shows a cut stream the same way.

Memory stays bounded whatever a command prints: at most ``limit`` bytes of head and tail plus
one tail's worth of slack and the chunk being fed. Decoding is UTF-8 with ``errors="replace"``;
a multibyte character cut by the head/tail boundary is dropped whole (and counted) rather than
shown as a replacement character.
"""

from __future__ import annotations

__all__ = ["HeadTailBuffer", "head_tail_text", "truncation_marker"]


def truncation_marker(dropped: int) -> str:
    """The text put between the kept head and tail of a truncated stream."""
    return f"\n... [{dropped} bytes truncated] ...\n"


def _incomplete_utf8_suffix(data: bytes | bytearray) -> int:
    """Length of an incomplete UTF-8 sequence at the end of ``data`` (0 when it ends cleanly)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if byte & 0x80 == 0:  # ASCII ends cleanly
            return 0
        if byte & 0xE0 == 0xC0:
            needed = 2
        elif byte & 0xF0 == 0xE0:
            needed = 3
        elif byte & 0xF8 == 0xF0:
            needed = 4
        else:  # not a valid lead byte: leave it to the decoder
            return 0
        return back if back < needed else 0
    return 0


def _continuation_prefix(data: bytes | bytearray) -> int:
    """Number of UTF-8 continuation bytes (at most 3) at the start of ``data``."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


class HeadTailBuffer:
    """Collects a stream, keeping its first ``limit // 2`` and last ``limit - limit // 2`` bytes.

    :meth:`feed` accepts chunks of any size; :meth:`text` returns the decoded output and whether
    anything was dropped. When the stream fits in ``limit`` bytes it is returned whole.
    """

    __slots__ = ("_head", "_head_limit", "_tail", "_tail_limit", "_total")

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError("limit must be at least 2 bytes")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    @property
    def total_bytes(self) -> int:
        """Bytes fed so far (kept or not)."""
        return self._total

    @property
    def truncated(self) -> bool:
        """True when more bytes were fed than are kept."""
        return self._total > self._head_limit + self._tail_limit

    def feed(self, data: bytes) -> None:
        """Add ``data`` to the stream."""
        self._total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
            if not data:
                return
        self._tail += data
        if len(self._tail) > 2 * self._tail_limit:
            del self._tail[: -self._tail_limit]

    def text(self) -> tuple[str, bool]:
        """Return ``(decoded output, truncated)``; a marker replaces the dropped middle."""
        return head_tail_text(self._head, self._tail[-self._tail_limit :], self._total)


def head_tail_text(
    head: bytes | bytearray, tail: bytes | bytearray, total: int
) -> tuple[str, bool]:
    """Render a stream of ``total`` bytes of which only ``head`` (its first bytes) and ``tail``
    (its last bytes) were kept: ``(decoded output, truncated)``.

    When ``total`` does not exceed what was kept, the stream is ``head + tail`` and is returned
    whole. Otherwise a :func:`truncation_marker` stands for the dropped middle; a multibyte
    character cut at either edge is dropped whole and counted.
    """
    if total <= len(head) + len(tail):
        return (bytes(head) + bytes(tail)).decode("utf-8", "replace"), False
    kept_head = bytes(head[: len(head) - _incomplete_utf8_suffix(head)])
    kept_tail = bytes(tail[_continuation_prefix(tail) :])
    dropped = total - len(kept_head) - len(kept_tail)
    decoded = (
        kept_head.decode("utf-8", "replace")
        + truncation_marker(dropped)
        + kept_tail.decode("utf-8", "replace")
    )
    return decoded, True
