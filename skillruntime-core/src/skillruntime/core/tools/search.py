"""What the ``ls``, ``glob`` and ``grep`` tools say: descriptions, limits, the file-system
queries of a call and the answers for their results (the tools are built by
:mod:`~skillruntime.core.tools.async_runtime_tools` and its generated sync face)."""

from __future__ import annotations

from .._moved import moved_names
from ..files.globbing import WalkResult, relative_path
from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult
from .arguments import GlobArguments, GrepArguments, LsArguments
from .context import truncate

__all__ = [
    "DEFAULT_LS_RESULTS",
    "FILE_TYPES",
    "GREP_TIME_BUDGET_SECONDS",
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_GLOB_RESULTS",
    "MAX_GREP_LINE_LENGTH",
    "MAX_LS_RESULTS",
    "MAX_OUTPUT_CHARS",
    "glob_answer",
    "glob_query",
    "grep_answer",
    "grep_query",
    "ls_answer",
    "ls_bounds",
]

DEFAULT_LS_RESULTS = 1000
MAX_LS_RESULTS = 5000
MAX_DEPTH = 100
MAX_FILES = 5000
MAX_GLOB_RESULTS = 1000
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_OUTPUT_CHARS = 100_000
MAX_GREP_LINE_LENGTH = 10_000
GREP_TIME_BUDGET_SECONDS = 30.0
"""Wall-clock budget of one ``grep`` call; past it the search stops and says so."""

FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.jsx", "*.mjs", "*.cjs"),
    "ts": ("*.ts", "*.tsx"),
    "java": ("*.java", "*.jsp"),
    "go": ("*.go",),
    "rust": ("*.rs",),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "md": ("*.md", "*.markdown"),
    "sh": ("*.sh", "*.bash"),
    "html": ("*.html", "*.htm"),
    "css": ("*.css",),
    "csv": ("*.csv",),
    "txt": ("*.txt",),
}

LS_DESCRIPTION = (
    "Lists files and directories inside the configured skill runtime. Use depth to recurse "
    "(default 1, at most 100) and max_results to limit entries (default 1000, at most 5000). "
    "Skips common noise directories (.git, node_modules, __pycache__, build, dist, …) and labels "
    "each entry as [dir] or [file], directories first."
)
GLOB_DESCRIPTION = (
    "Finds files by glob pattern inside the configured skill runtime (never the host). '*.py' "
    "matches by file name at any depth; 'src/**/*.py' matches paths relative to the search root. "
    "Returns absolute runtime paths, newest first, at most 1000."
)
GREP_DESCRIPTION = (
    "Searches UTF-8 file contents with a regular expression (RE2 syntax: linear time, no "
    "backreferences or lookaround) inside the configured skill runtime. Output modes: "
    "files_with_matches (default, one path per line), content "
    "('path:line:text' for matches, 'path-line-text' for context lines) and count "
    "('path:matches'). Skips noise directories and files over 2 MiB; use head_limit and offset to "
    "page through results."
)


def ls_bounds(arguments: LsArguments) -> tuple[int, int]:
    """``(depth, limit)`` of an ``ls`` call, capped (shared by the sync and async tools)."""
    depth = min(arguments.depth or 1, MAX_DEPTH)
    return depth, min(arguments.max_results or DEFAULT_LS_RESULTS, MAX_LS_RESULTS)


def ls_answer(root: str, result: WalkResult, limit: int) -> str:
    """The ``ls`` tool's answer for a walk below ``root``: directories first, then files."""
    if not result.entries:
        return f"Directory is empty: {root}"
    entries = sorted(
        result.entries,
        key=lambda item: (not item.is_directory, relative_path(item.path, root)),
    )
    lines = [root]
    for entry in entries:
        label = "[dir] " if entry.is_directory else "[file]"
        lines.append(f"  {label} {relative_path(entry.path, root)}")
    if result.truncated:
        lines.append(f"  ... (limit of {limit} reached; use a smaller depth or narrow the path)")
    return "\n".join(lines)


def glob_query(arguments: GlobArguments) -> GlobQuery:
    """The file-system query of a ``glob`` call (shared by the sync and async tools)."""
    return GlobQuery(arguments.pattern, max_depth=MAX_DEPTH, max_files=MAX_FILES)


def glob_answer(arguments: GlobArguments, result: SearchResult) -> str:
    """The ``glob`` tool's answer for a search result: newest first, capped, with notes."""
    matches = list(result.entries)
    if not matches:
        return f"No files found matching pattern: {arguments.pattern}"
    matches.sort(key=lambda item: (-(item.modified_time or 0.0), item.path))
    lines = [entry.path for entry in matches[:MAX_GLOB_RESULTS]]
    if len(matches) > MAX_GLOB_RESULTS:
        lines.append(
            f"... ({len(matches) - MAX_GLOB_RESULTS} more matches not shown; narrow the "
            "pattern or path)"
        )
    if result.truncated:
        lines.append(f"... (search stopped after {MAX_FILES} files; narrow the path)")
    return "\n".join(lines)


def grep_answer(arguments: GrepArguments, found: GrepResult) -> str:
    """The ``grep`` tool's answer for a search result (window, budget and truncation notes)."""
    window = found.entries
    budget_note = (
        f"... (search stopped after its {GREP_TIME_BUDGET_SECONDS:g} s time budget; results "
        "are partial: narrow the path or glob)"
        if found.out_of_time
        else ""
    )
    if not window:
        if budget_note:
            return f"No matches found for pattern: {arguments.pattern}\n{budget_note}"
        return f"No matches found for pattern: {arguments.pattern}"
    output = "\n".join(window)
    if budget_note:
        output += "\n" + budget_note
    if found.truncated:
        output += f"\n... (search stopped after {MAX_FILES} files; narrow the path or glob)"
    return truncate(output, MAX_OUTPUT_CHARS)


def grep_query(arguments: GrepArguments) -> GrepQuery:
    """The file-system query of a ``grep`` call (shared by the sync and async tools)."""
    types = FILE_TYPES.get((arguments.type or "").strip().lower())
    before = arguments.context if arguments.context is not None else arguments.context_before or 0
    after = arguments.context if arguments.context is not None else arguments.context_after or 0
    return GrepQuery(
        arguments.pattern,
        case_insensitive=bool(arguments.case_insensitive),
        multiline=bool(arguments.multiline),
        glob=arguments.glob,
        file_types=types,
        output_mode=arguments.output_mode,
        before=before,
        after=after,
        show_line_numbers=arguments.show_line_numbers,
        offset=arguments.offset,
        head_limit=arguments.head_limit,
        max_depth=MAX_DEPTH,
        max_files=MAX_FILES,
        max_file_bytes=MAX_FILE_BYTES,
        max_line_length=MAX_GREP_LINE_LENGTH,
        time_budget=GREP_TIME_BUDGET_SECONDS,
    )


__getattr__ = moved_names(
    __name__,
    dict.fromkeys(("glob_tool", "grep_tool", "ls_tool"), "skillruntime.core.tools.runtime_tools"),
)
"""The tool builders that moved to :mod:`skillruntime.core.tools.runtime_tools`, served with a
:class:`DeprecationWarning`."""
