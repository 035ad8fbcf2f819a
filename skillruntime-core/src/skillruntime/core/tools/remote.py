"""Remote-first skills in a turn (remote-skill RFC §1, §5.1).

A source that also implements :class:`RemoteFirstSource` (e.g. an OpenViking source) is
activated in a :class:`~skillruntime.core.tools.turn.SkillTurn` from its ``SKILL.md`` and manifest
only: nothing of the package is downloaded and nothing is prepared in the runtime. The package is
materialized (``load`` → prepare → ``metadata.requires`` check → turn copy) on the first tool
call that needs a local file of it; a ``read`` of one of its files before that is served from the
server (``read_resource``). An instruction-only skill therefore never downloads its package or
touches the runtime. Outside a turn, sources are loaded in full as before.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..models import Skill
from .files import MAX_LINE_LENGTH, MAX_READ_BYTES

__all__ = ["RemoteFirstSource", "format_text_read"]


@runtime_checkable
class RemoteFirstSource(Protocol):
    """A skill source that can be activated before its package is downloaded."""

    def load_instructions(self) -> Skill:
        """The skill with only ``SKILL.md`` on the host; checks access and revision."""
        ...

    @property
    def package_files(self) -> frozenset[str]:
        """The package's file paths (known once :meth:`load_instructions` ran)."""
        ...

    def read_resource(self, path: str) -> bytes:
        """One verified file of the package, read remotely."""
        ...


def format_text_read(location: str, data: bytes, offset: int | None, limit: int | None) -> str:
    """A ``read`` result for remote text: numbered lines from ``offset`` (1-based), at most
    ``limit`` (default 2000) lines, each cut to :data:`~.files.MAX_LINE_LENGTH` characters;
    files over :data:`~.files.MAX_READ_BYTES` are refused like the ``read`` tool refuses them."""
    if len(data) > MAX_READ_BYTES:
        return (
            f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {location}. "
            "Read a smaller part with bash instead."
        )
    lines = data.decode("utf-8", errors="replace").splitlines()
    start = max((offset or 1) - 1, 0)
    shown = lines[start : start + (limit or 2000)]
    header = f"File: {location}\n"
    if not lines:
        return header + "(empty file)\n"
    if start >= len(lines):
        return header + f"(the file has {len(lines)} lines; offset {offset} is past its end)\n"
    body = "".join(f"{start + index + 1:6d}\t{_cut(line)}\n" for index, line in enumerate(shown))
    return header + f"Showing lines {start + 1}-{start + len(shown)} of {len(lines)}\n\n" + body


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_LENGTH else line[:MAX_LINE_LENGTH] + "... (line truncated)"
