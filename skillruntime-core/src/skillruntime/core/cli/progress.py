"""Transfer progress of ``skillruntime files put/get`` on stderr.

On a terminal the line is redrawn in place at every whole percent; elsewhere (``--progress``
with stderr redirected) one line is written per tenth, so logs stay short. Only sizes and the
file name are shown, never content.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TextIO

__all__ = ["TransferProgress", "format_size"]


def format_size(size: int) -> str:
    """``size`` bytes in binary units with one decimal (``1.5 MiB``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class TransferProgress:
    """Counts bytes of one transfer of ``total`` bytes (``None`` when unknown) and reports."""

    def __init__(self, label: str, total: int | None, stream: TextIO) -> None:
        self._label = label
        self._total = total
        self._stream = stream
        self._interactive = stream.isatty()
        self._step = 1 if self._interactive else 10
        self._done = 0
        self._shown = -1

    def advance(self, count: int) -> None:
        """Record ``count`` more bytes and redraw when the next step is reached."""
        self._done += count
        if not self._total:
            return
        percent = min(100, self._done * 100 // self._total)
        if self._shown < 0 or percent // self._step > self._shown // self._step:
            self._shown = percent
            self._draw(percent)

    def chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """Pass ``chunks`` through, counting them."""
        for chunk in chunks:
            yield chunk
            self.advance(len(chunk))

    def finish(self) -> None:
        """Write the final line (the whole transfer, 100 %)."""
        if self._total is None:
            self._total = self._done
        if self._shown != 100:
            self._shown = 100
            self._draw(100)
        if self._interactive:
            self._stream.write("\n")
        self._stream.flush()

    def _draw(self, percent: int) -> None:
        line = f"{self._label}: {format_size(self._done)} / {format_size(self._total or 0)}"
        line += f" ({percent}%)"
        self._stream.write("\r" + line if self._interactive else line + "\n")
        self._stream.flush()
