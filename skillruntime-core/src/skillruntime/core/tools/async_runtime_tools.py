"""The seven runtime tools of an async tool set: ``bash``, ``read``, ``write``, ``edit``, ``ls``,
``glob`` and ``grep`` over an :class:`~skillruntime.core.tools.context.AsyncToolContext`.

The one source of these tools: :mod:`skillruntime.core.tools.runtime_tools`, the sync face, is
generated from it (``scripts/generate_sync.py``). Names, descriptions, argument models, limits
and result texts live in :mod:`~skillruntime.core.tools.shell`,
:mod:`~skillruntime.core.tools.files` and :mod:`~skillruntime.core.tools.search`; what is here
is the order of the runtime calls and the answer each outcome gets. Every builder returns an
:class:`~skillruntime.core.tools.base.AsyncSkillTool` whose handler awaits the runtime, so a
call holds no thread.
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """The seven runtime tools of a tool set: ``bash``, ``read``, ``write``, ``edit``, ``ls``,
    ``glob`` and ``grep`` over a :class:`~skillruntime.core.tools.context.ToolContext`.

    Generated from :mod:`skillruntime.core.tools.async_runtime_tools`, the one source of both
    faces. Names, descriptions, argument models, limits and result texts live in
    :mod:`~skillruntime.core.tools.shell`, :mod:`~skillruntime.core.tools.files` and
    :mod:`~skillruntime.core.tools.search`; what is here is the order of the runtime calls and the
    answer each outcome gets.
    """

from pydantic import BaseModel

from ..errors import FileTooLargeError, RuntimeFileError, RuntimeIsADirectoryError
from ..files.async_spi import AsyncSkillRuntimeFileSystem
from ..files.globbing import GlobMatcher, walk_async
from ..files.linear_regex import InvalidPatternError, LinearPattern
from ..files.search import GrepEngine
from ..models import FileInfo, SkillExecutionRequest
from .arguments import (
    BashArguments,
    EditArguments,
    GlobArguments,
    GrepArguments,
    LsArguments,
    ReadArguments,
    WriteArguments,
)
from .base import AsyncHandler, AsyncSkillTool, Guard
from .context import AsyncToolContext
from .files import (
    DEFAULT_READ_LINES,
    EDIT_DESCRIPTION,
    MAX_EDIT_BYTES,
    MAX_READ_BYTES,
    READ_DESCRIPTION,
    WRITE_DESCRIPTION,
    existing_file_problem,
    line_window,
    numbered,
    split_counted,
)
from .search import (
    GLOB_DESCRIPTION,
    GREP_DESCRIPTION,
    LS_DESCRIPTION,
    glob_answer,
    glob_query,
    grep_answer,
    grep_query,
    ls_answer,
    ls_bounds,
)
from .shell import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, format_result
from .shell import DESCRIPTION as BASH_DESCRIPTION

__all__ = [
    "bash_tool",
    "edit_tool",
    "glob_tool",
    "grep_tool",
    "ls_tool",
    "read_tool",
    "runtime_tools",
    "write_tool",
]


_TOOLS: dict[str, tuple[str, type[BaseModel], str]] = {
    "bash": (BASH_DESCRIPTION, BashArguments, "running the command in the {} runtime failed"),
    "read": (READ_DESCRIPTION, ReadArguments, "reading the file from the {} runtime failed"),
    "write": (WRITE_DESCRIPTION, WriteArguments, "writing the file in the {} runtime failed"),
    "edit": (EDIT_DESCRIPTION, EditArguments, "editing the file in the {} runtime failed"),
    "ls": (LS_DESCRIPTION, LsArguments, "listing in the {} runtime failed"),
    "glob": (GLOB_DESCRIPTION, GlobArguments, "glob in the {} runtime failed"),
    "grep": (GREP_DESCRIPTION, GrepArguments, "grep in the {} runtime failed"),
}
"""Each tool's description, argument model and the prefix of its failure texts ({}: the
runtime's name)."""


def _tool(
    name: str, run: AsyncHandler, context: AsyncToolContext, guard: Guard | None
) -> AsyncSkillTool:
    description, model, failed = _TOOLS[name]
    return AsyncSkillTool(
        name, description, model, run, guard=guard, error_prefix=failed.format(context.name)
    )


def runtime_tools(context: AsyncToolContext, guard: Guard | None = None) -> list[AsyncSkillTool]:
    """The seven runtime tools over ``context``, in the order a tool set lists them."""
    return [
        bash_tool(context, guard),
        read_tool(context, guard),
        write_tool(context, guard),
        edit_tool(context, guard),
        ls_tool(context, guard),
        glob_tool(context, guard),
        grep_tool(context, guard),
    ]


def bash_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``bash`` tool: one command through the runtime's ``execute``."""

    async def run(arguments: BashArguments) -> str:
        timeout = min(arguments.timeout_seconds or DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
        working_directory = (
            context.resolve(arguments.working_directory) if arguments.working_directory else None
        )
        result = await context.runtime.execute(
            SkillExecutionRequest(
                command=arguments.command,
                working_directory=working_directory,
                timeout_seconds=timeout,
            )
        )
        return format_result(result.stdout, result.stderr, result.exit_code, result.timed_out)

    return _tool("bash", run, context, guard)


class _AnswerError(Exception):
    """The file to read cannot be: ``args[0]`` is the tool's answer."""


async def _read_existing(
    context: AsyncToolContext, path: str, max_bytes: int, too_large: str
) -> tuple[AsyncSkillRuntimeFileSystem, str]:
    """The file system and the text of ``path``, read in one file-system call. A file over
    ``max_bytes`` raises :class:`_AnswerError` with ``too_large``; a missing file or a
    directory is told apart by a ``stat`` only once the read failed, and raises
    :class:`_AnswerError` saying so."""
    files = await context.file_system()
    try:
        return files, await files.read_text(path, max_bytes)
    except FileTooLargeError:
        raise _AnswerError(too_large) from None
    except RuntimeFileError:  # backends differ in what a directory read raises: ask stat
        problem = existing_file_problem(context.name, path, await files.stat(path))
        if problem:
            raise _AnswerError(problem) from None
        raise


def read_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``read`` tool: numbered lines of a text file, a window of them on request."""

    async def run(arguments: ReadArguments) -> str:
        path = context.resolve(arguments.file_path)
        too_large = (
            f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {path}. "
            "Use bash (for example head, tail or sed -n) to read part of it."
        )
        try:
            _, text = await _read_existing(context, path, MAX_READ_BYTES, too_large)
        except _AnswerError as answer:
            return str(answer.args[0])
        lines, chars = split_counted(text)
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
            return header + numbered(lines, 1, chars)
        return header + numbered(lines[start - 1 : end], start)

    return _tool("read", run, context, guard)


def write_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``write`` tool: create or replace a text file (never a directory)."""

    async def run(arguments: WriteArguments) -> str:
        path = context.resolve(arguments.file_path)
        files = await context.file_system()
        try:
            size, existed = await files.overwrite_text(path, arguments.content)
        except RuntimeIsADirectoryError:
            return f"Error: Path is a directory, not a file: {path}"
        verb = "overwrote" if existed else "created"
        return f"Successfully {verb} file in {context.name} runtime: {path} ({size} bytes)"

    return _tool("write", run, context, guard)


def edit_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``edit`` tool: an exact replacement, answered with the edited region."""

    async def run(arguments: EditArguments) -> str:
        old, new = arguments.old_string, arguments.new_string
        if not old:
            return "Error: old_string must not be empty"
        if old == new:
            return "Error: old_string and new_string must be different"
        path = context.resolve(arguments.file_path)
        too_large = f"Error: File is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB: {path}"
        try:
            files, text = await _read_existing(context, path, MAX_EDIT_BYTES, too_large)
        except _AnswerError as answer:
            return str(answer.args[0])
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
        await files.write_text(path, updated)
        first_line = text.count("\n", 0, first)
        last_line = first_line + new.count("\n", 0, max(0, len(new) - 1))
        start, window = line_window(updated, first_line, first, last_line)
        replaced = f"{occurrences} occurrences" if arguments.replace_all else "1 occurrence"
        return (
            f"The file {path} was updated in {context.name} runtime ({replaced} replaced).\n"
            + numbered(window, start + 1)
        )

    return _tool("edit", run, context, guard)


async def _search_root(
    files: AsyncSkillRuntimeFileSystem, context: AsyncToolContext, path: str | None
) -> tuple[str, FileInfo | None]:
    root = context.resolve(path)
    return root, await files.stat(root)


def ls_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``ls`` tool: a bounded, noise-skipping walk, directories first."""

    async def run(arguments: LsArguments) -> str:
        files = await context.file_system()
        root, info = await _search_root(files, context, arguments.path)
        if info is None:
            return f"Error: Path does not exist in {context.name} runtime: {root}"
        depth, limit = ls_bounds(arguments)
        result = await walk_async(files, info, depth=depth, limit=limit, include_directories=True)
        return ls_answer(root, result, limit)

    return _tool("ls", run, context, guard)


def glob_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``glob`` tool: the file system's ``glob``, newest first."""

    async def run(arguments: GlobArguments) -> str:
        if not arguments.pattern.strip():
            return "Error: The glob pattern must not be empty"
        try:
            GlobMatcher(arguments.pattern)
        except ValueError as exc:
            return f"Error: Invalid glob pattern: {exc}"
        files = await context.file_system()
        root, info = await _search_root(files, context, arguments.path)
        if info is None:
            return f"Error: Path does not exist in {context.name} runtime: {root}"
        return glob_answer(arguments, await files.glob(info, glob_query(arguments)))

    return _tool("glob", run, context, guard)


def grep_tool(context: AsyncToolContext, guard: Guard | None = None) -> AsyncSkillTool:
    """Build the ``grep`` tool: the file system's ``grep`` with a linear-time pattern."""

    async def run(arguments: GrepArguments) -> str:
        try:
            LinearPattern(
                arguments.pattern,
                case_insensitive=bool(arguments.case_insensitive),
                dot_matches_newline=bool(arguments.multiline),
            )
        except InvalidPatternError as exc:
            return f"Error: Invalid regex pattern: {exc}"
        files = await context.file_system()
        root, info = await _search_root(files, context, arguments.path)
        if info is None:
            return f"Error: Path does not exist in {context.name} runtime: {root}"
        query = grep_query(arguments)
        try:
            GrepEngine(query, root)
        except ValueError as exc:
            return f"Error: Invalid glob pattern: {exc}"
        return grep_answer(arguments, await files.grep(info, query))

    return _tool("grep", run, context, guard)
