"""What the ``read``, ``write`` and ``edit`` tools say and how they number lines.

The descriptions, limits, the line splitting and numbering of ``read`` and the edited-region
window of ``edit``; the tools themselves are built by
:mod:`~skillruntime.core.tools.async_runtime_tools` (async) and
:mod:`~skillruntime.core.tools.runtime_tools` (sync, generated from it)."""

from __future__ import annotations

import functools

from .._moved import moved_names
from ..models import FileInfo

__all__ = [
    "DEFAULT_READ_LINES",
    "MAX_EDIT_BYTES",
    "MAX_LINE_LENGTH",
    "MAX_READ_BYTES",
    "SNIPPET_CONTEXT",
    "existing_file_problem",
    "line_window",
    "numbered",
    "split_counted",
    "split_lines",
]

DEFAULT_READ_LINES = 2000
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_EDIT_BYTES = 8 * 1024 * 1024
MAX_LINE_LENGTH = 2000
SNIPPET_CONTEXT = 3
_CUT_MARKER = "... (line truncated)"

READ_DESCRIPTION = (
    "Reads a UTF-8 text file from the configured skill runtime (never the host). Returns a header "
    "'File: <path>' / 'Showing lines S-E of N' and numbered lines (number, tab, text). Defaults to "
    "2000 lines from line 1; use offset (1-based) and limit for other parts. Files over 4 MiB "
    "cannot be read this way and lines over 2000 characters are cut."
)
WRITE_DESCRIPTION = (
    "Creates or overwrites a UTF-8 text file inside the configured skill runtime. Parent "
    "directories are created. Give the complete content."
)
EDIT_DESCRIPTION = (
    "Performs an exact text replacement in a UTF-8 file inside the configured skill runtime. "
    "old_string must occur exactly once unless replace_all is true; returns the edited region "
    "with line numbers."
)


_CACHED_NUMBERS = 4096


_CUT_SPEC = f"%.{MAX_LINE_LENGTH}s"


@functools.cache
def _number_template() -> tuple[str, tuple[int, ...]]:
    """``"{n:6d}\t%.2000s\n"`` for ``n`` in ``0 .. _CACHED_NUMBERS - 1`` as one ``%`` template
    (the precision is :data:`MAX_LINE_LENGTH`), with the offset where each number's part starts
    (and the end), built once."""
    parts = [f"{number:6d}\t{_CUT_SPEC}\n" for number in range(_CACHED_NUMBERS)]
    offsets = [0]
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    return "".join(parts), tuple(offsets)


def numbered(lines: list[str], first: int, chars: int | None = None) -> str:
    """``lines`` as ``<number, 6 wide><tab><line>\n`` from ``first`` on; lines over
    ``MAX_LINE_LENGTH`` characters are cut with a marker. ``chars``, when the caller knows it,
    is ``sum(map(len, lines))``.

    Numbers below ``_CACHED_NUMBERS`` are filled in by one ``%`` of a slice of a prebuilt
    template (the line texts are only arguments, so a ``%`` in them is inert): no Python step
    per line. The template's precision cuts long lines; an answer shorter than the uncut one
    tells that a line was cut, and only then are the lines looked at one by one to add the
    marker. Later numbers are formatted one by one.
    """
    if not lines:
        return ""
    end = first + len(lines)
    if end <= _CACHED_NUMBERS:
        template, offsets = _number_template()
        begin, stop = offsets[first], offsets[end]
        answer = template[begin:stop] % tuple(lines)
        if chars is None:
            chars = sum(map(len, lines))
        if len(answer) == stop - begin - len(_CUT_SPEC) * len(lines) + chars:
            return answer
    lines = [
        line if len(line) <= MAX_LINE_LENGTH else line[:MAX_LINE_LENGTH] + _CUT_MARKER
        for line in lines
    ]
    return "".join(f"{number:6d}\t{line}\n" for number, line in enumerate(lines, start=first))


def split_lines(text: str) -> list[str]:
    """Lines split on ``\n`` (a preceding ``\r`` dropped); a final newline ends the last line."""
    return split_counted(text)[0]


def split_counted(text: str) -> tuple[list[str], int]:
    """:func:`split_lines` and the characters of the lines (``sum(map(len, lines))``), the
    latter known from the split without a pass over the lines."""
    if not text:
        return [], 0
    lines = text.split("\n")
    chars = len(text) - len(lines) + 1  # every "\n" is one character of no line
    if lines[-1] == "":
        lines.pop()
    if "\r" not in text:
        return lines, chars
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines, sum(map(len, lines))


def line_window(text: str, first_line: int, position: int, last_line: int) -> tuple[int, list[str]]:
    """The lines ``first_line - SNIPPET_CONTEXT`` to ``last_line + SNIPPET_CONTEXT`` of ``text``
    (clamped to the file) as ``(index of the first, the lines)``, found by scanning for
    newlines around ``position`` (which lies on line ``first_line``) instead of splitting the
    whole file. ``last_line`` is the line of ``max(position, end of the change)``."""
    start = max(0, first_line - SNIPPET_CONTEXT)
    begin = position
    if start == 0:
        begin = 0
    else:
        for _ in range(first_line - start + 1):
            begin = text.rfind("\n", 0, begin)
        begin += 1
    stop = text.find("\n", max(position, begin))
    for _ in range(last_line - first_line):
        if stop < 0:
            break
        stop = text.find("\n", stop + 1)
    for _ in range(SNIPPET_CONTEXT):
        if stop < 0:
            break
        stop = text.find("\n", stop + 1)
    if stop < 0:  # the window reaches the end of the file: the usual final-newline rule
        return start, split_lines(text[begin:])
    lines = text[begin:stop].split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return start, lines


def existing_file_problem(runtime_name: str, path: str, info: FileInfo | None) -> str | None:
    """The answer of a file tool whose ``path`` is missing (``info`` is ``None``) or a
    directory, else ``None``."""
    if info is None:
        return f"Error: File does not exist in {runtime_name} runtime: {path}"
    if info.is_directory:
        return f"Error: Path is a directory, not a file: {path}"
    return None


__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("edit_tool", "read_tool", "write_tool"), "skillruntime.core.tools.runtime_tools"
    ),
)
"""The tool builders that moved to :mod:`skillruntime.core.tools.runtime_tools`, served with a
:class:`DeprecationWarning`."""
