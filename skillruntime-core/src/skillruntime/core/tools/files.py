"""The ``read``, ``write`` and ``edit`` tools over the runtime file system."""

from __future__ import annotations

import functools

from ..errors import FileTooLargeError, RuntimeFileError, RuntimeIsADirectoryError
from .arguments import EditArguments, ReadArguments, WriteArguments
from .base import Guard, SkillTool
from .context import ToolContext

__all__ = [
    "DEFAULT_READ_LINES",
    "MAX_EDIT_BYTES",
    "MAX_LINE_LENGTH",
    "MAX_READ_BYTES",
    "edit_tool",
    "read_tool",
    "write_tool",
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


def _numbered(lines: list[str], first: int, chars: int | None = None) -> str:
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


def _split_lines(text: str) -> list[str]:
    """Lines split on ``\n`` (a preceding ``\r`` dropped); a final newline ends the last line."""
    return _split_counted(text)[0]


def _split_counted(text: str) -> tuple[list[str], int]:
    """:func:`_split_lines` and the characters of the lines (``sum(map(len, lines))``), the
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


def _line_window(
    text: str, first_line: int, position: int, last_line: int
) -> tuple[int, list[str]]:
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
        return start, _split_lines(text[begin:])
    lines = text[begin:stop].split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return start, lines


def _existing_file(context: ToolContext, path: str) -> str | None:
    info = context.files.stat(path)
    if info is None:
        return f"Error: File does not exist in {context.name} runtime: {path}"
    if info.is_directory:
        return f"Error: Path is a directory, not a file: {path}"
    return None


def _read_existing(context: ToolContext, path: str, max_bytes: int) -> str:
    """The text of ``path`` read in one file-system call; a missing file or a directory is
    told apart by a ``stat`` only once the read failed (:class:`_MissingFileError` carries
    the tool's answer then)."""
    try:
        return context.files.read_text(path, max_bytes)
    except FileTooLargeError:
        raise
    except RuntimeFileError:  # backends differ in what a directory read raises: ask stat
        problem = _existing_file(context, path)
        if problem:
            raise _MissingFileError(problem) from None
        raise


class _MissingFileError(Exception):
    """The file to read is missing or a directory; ``args[0]`` is the tool's answer."""


def read_tool(context: ToolContext, guard: Guard | None = None) -> SkillTool:
    """Build the ``read`` tool."""

    def run(arguments: ReadArguments) -> str:
        path = context.resolve(arguments.file_path)
        try:
            text = _read_existing(context, path, MAX_READ_BYTES)
        except _MissingFileError as missing:
            return str(missing.args[0])
        except FileTooLargeError:
            return (
                f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {path}. "
                "Use bash (for example head, tail or sed -n) to read part of it."
            )
        lines, chars = _split_counted(text)
        total = len(lines)
        start = arguments.offset or 1
        count = arguments.limit or DEFAULT_READ_LINES
        if start > total:
            if total == 0:
                return f"File is empty: {path}"
            return f"No lines to read. File has {total} lines, but offset was {start}"
        end = min(total, start + count - 1)
        header = f"File: {path}\nShowing lines {start}-{end} of {total}\n\n"
        if start == 1 and end == total:
            return header + _numbered(lines, 1, chars)
        return header + _numbered(lines[start - 1 : end], start)

    return SkillTool(
        "read",
        READ_DESCRIPTION,
        ReadArguments,
        run,
        guard=guard,
        error_prefix=f"reading the file from the {context.name} runtime failed",
    )


def write_tool(context: ToolContext, guard: Guard | None = None) -> SkillTool:
    """Build the ``write`` tool."""

    def run(arguments: WriteArguments) -> str:
        path = context.resolve(arguments.file_path)
        try:
            size, existed = context.files.overwrite_text(path, arguments.content)
        except RuntimeIsADirectoryError:
            return f"Error: Path is a directory, not a file: {path}"
        verb = "overwrote" if existed else "created"
        return f"Successfully {verb} file in {context.name} runtime: {path} ({size} bytes)"

    return SkillTool(
        "write",
        WRITE_DESCRIPTION,
        WriteArguments,
        run,
        guard=guard,
        error_prefix=f"writing the file in the {context.name} runtime failed",
    )


def edit_tool(context: ToolContext, guard: Guard | None = None) -> SkillTool:
    """Build the ``edit`` tool."""

    def run(arguments: EditArguments) -> str:
        old, new = arguments.old_string, arguments.new_string
        if not old:
            return "Error: old_string must not be empty"
        if old == new:
            return "Error: old_string and new_string must be different"
        path = context.resolve(arguments.file_path)
        try:
            text = _read_existing(context, path, MAX_EDIT_BYTES)
        except _MissingFileError as missing:
            return str(missing.args[0])
        except FileTooLargeError:
            return f"Error: File is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB: {path}"
        first = text.find(old)
        if first < 0:
            return f"Error: old_string not found in file: {path}"
        if arguments.replace_all:
            occurrences = text.count(old)
            updated = text.replace(old, new)
        elif text.find(old, first + len(old)) >= 0:
            return (
                f"Error: old_string appears {text.count(old)} times. Use a more specific string "
                "or set replace_all=true."
            )
        else:
            occurrences = 1
            updated = text.replace(old, new, 1)  # one copy; the first match is at ``first``
        context.files.write_text(path, updated)
        first_line = text.count("\n", 0, first)
        last_line = first_line + new.count("\n", 0, max(0, len(new) - 1))
        start, window = _line_window(updated, first_line, first, last_line)
        replaced = f"{occurrences} occurrences" if arguments.replace_all else "1 occurrence"
        return (
            f"The file {path} was updated in {context.name} runtime ({replaced} replaced).\n"
            + _numbered(window, start + 1)
        )

    return SkillTool(
        "edit",
        EDIT_DESCRIPTION,
        EditArguments,
        run,
        guard=guard,
        error_prefix=f"editing the file in the {context.name} runtime failed",
    )
