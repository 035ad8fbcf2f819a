"""The ``read``, ``write`` and ``edit`` tools over the runtime file system."""

from __future__ import annotations

from ..errors import FileTooLargeError
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


def _numbered(lines: list[str], first: int) -> str:
    out = []
    for number, line in enumerate(lines, start=first):
        shown = line if len(line) <= MAX_LINE_LENGTH else line[:MAX_LINE_LENGTH] + _CUT_MARKER
        out.append(f"{number:6d}\t{shown}\n")
    return "".join(out)


def _split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` (a preceding ``\\r`` dropped); a final newline ends the last line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _existing_file(context: ToolContext, path: str) -> str | None:
    info = context.files.stat(path)
    if info is None:
        return f"Error: File does not exist in {context.name} runtime: {path}"
    if info.is_directory:
        return f"Error: Path is a directory, not a file: {path}"
    return None


def read_tool(context: ToolContext, guard: Guard | None = None) -> SkillTool:
    """Build the ``read`` tool."""

    def run(arguments: ReadArguments) -> str:
        path = context.resolve(arguments.file_path)
        problem = _existing_file(context, path)
        if problem:
            return problem
        try:
            text = context.files.read_text(path, MAX_READ_BYTES)
        except FileTooLargeError:
            return (
                f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {path}. "
                "Use bash (for example head, tail or sed -n) to read part of it."
            )
        lines = _split_lines(text)
        total = len(lines)
        start = arguments.offset or 1
        count = arguments.limit or DEFAULT_READ_LINES
        if start > total:
            if total == 0:
                return f"File is empty: {path}"
            return f"No lines to read. File has {total} lines, but offset was {start}"
        end = min(total, start + count - 1)
        header = f"File: {path}\nShowing lines {start}-{end} of {total}\n\n"
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
        files = context.files
        info = files.stat(path)
        if info is not None and info.is_directory:
            return f"Error: Path is a directory, not a file: {path}"
        size = files.write_text(path, arguments.content)
        verb = "overwrote" if info is not None else "created"
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
        problem = _existing_file(context, path)
        if problem:
            return problem
        try:
            text = context.files.read_text(path, MAX_EDIT_BYTES)
        except FileTooLargeError:
            return f"Error: File is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB: {path}"
        occurrences = text.count(old)
        if occurrences == 0:
            return f"Error: old_string not found in file: {path}"
        if occurrences > 1 and not arguments.replace_all:
            return (
                f"Error: old_string appears {occurrences} times. Use a more specific string or "
                "set replace_all=true."
            )
        first = text.index(old)
        updated = text.replace(old, new) if arguments.replace_all else text.replace(old, new, 1)
        context.files.write_text(path, updated)
        lines = _split_lines(updated)
        first_line = text.count("\n", 0, first)
        last_line = updated.count("\n", 0, max(first, first + len(new) - 1))
        start = max(0, first_line - SNIPPET_CONTEXT)
        end = min(len(lines), last_line + SNIPPET_CONTEXT + 1)
        replaced = f"{occurrences} occurrences" if arguments.replace_all else "1 occurrence"
        return (
            f"The file {path} was updated in {context.name} runtime ({replaced} replaced).\n"
            + _numbered(lines[start:end], start + 1)
        )

    return SkillTool(
        "edit",
        EDIT_DESCRIPTION,
        EditArguments,
        run,
        guard=guard,
        error_prefix=f"editing the file in the {context.name} runtime failed",
    )
