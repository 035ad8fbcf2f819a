"""Glob matching and the noise-skipping directory walk shared by ``ls``, ``glob`` and ``grep``.

Glob rules: ``*`` matches any characters except ``/``; ``?`` one character except ``/``;
``[...]``/``[!...]`` a character class; ``{a,b}`` alternatives; ``**`` as a whole path segment
matches zero or more directories (``**/x`` matches ``x``, ``a/x`` and ``a/b/x``; ``a/**`` everything
below ``a``). A pattern without ``/`` matches the file *name* at any depth; a pattern with ``/`` is
matched against the whole path relative to the search root.
"""

from __future__ import annotations

import posixpath
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..filesystem import SkillRuntimeFileSystem
from ..models import FileInfo

__all__ = [
    "IGNORED_DIRECTORIES",
    "GlobMatcher",
    "WalkResult",
    "glob_to_regex",
    "relative_path",
    "walk",
]

IGNORED_DIRECTORIES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "target",
        "build",
        "dist",
        ".idea",
        ".vscode",
        "__pycache__",
        ".gradle",
        ".mvn",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
"""Directories never walked into below a search root (the root's own ancestors are not checked)."""

_LISTING_LIMIT = 100_000


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                end = i + 2
                if at_start and end < n and pattern[end] == "/":
                    out.append("(?:[^/]*/)*")
                    i = end + 1
                    continue
                if at_start and end == n:
                    out.append(".*")
                    i = end
                    continue
                out.append("[^/]*")
                i = end
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            close = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if close == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : close]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = close
        elif char == "{":
            close = pattern.find("}", i)
            if close == -1:
                out.append(re.escape(char))
            else:
                options = pattern[i + 1 : close].split(",")
                out.append("(?:" + "|".join(_translate(option) for option in options) + ")")
                i = close
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (rules in the module docstring) to an anchored regular expression."""
    return re.compile(r"\A" + _translate(pattern) + r"\Z")


class GlobMatcher:
    """Matches paths relative to a search root against one glob pattern."""

    def __init__(self, pattern: str) -> None:
        pattern = pattern.strip()
        if pattern.startswith("./"):
            pattern = pattern[2:]
        self.pattern = pattern
        self._by_name = "/" not in pattern
        self._regex = glob_to_regex(pattern)

    def matches(self, relative: str) -> bool:
        """True when ``relative`` (POSIX, relative to the root) matches the pattern."""
        subject = posixpath.basename(relative) if self._by_name else relative
        return self._regex.match(subject) is not None


def relative_path(path: str, root: str) -> str:
    """``path`` relative to ``root``; the file name when ``path`` is ``root`` itself."""
    if path == root:
        return posixpath.basename(path.rstrip("/")) or path
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


@dataclass
class WalkResult:
    """Entries found by :func:`walk` and whether the walk stopped at its limit."""

    entries: list[FileInfo]
    truncated: bool


def walk(
    files: SkillRuntimeFileSystem,
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    include_directories: bool,
    keep: Callable[[FileInfo], bool] | None = None,
) -> WalkResult:
    """Breadth-first listing below ``root``, never entering :data:`IGNORED_DIRECTORIES`.

    A regular-file ``root`` yields itself. Each directory is listed with one
    ``list_directory(dir, 1)`` call, so noise directories cost nothing. Stops after ``limit``
    kept entries (``truncated`` tells whether more existed). ``keep`` filters entries counted.
    """
    if not root.is_directory:
        kept = keep is None or keep(root)
        return WalkResult([root] if kept else [], False)
    found: list[FileInfo] = []
    queue: deque[tuple[str, int]] = deque([(root.path, 1)])
    while queue:
        directory, level = queue.popleft()
        entries = sorted(
            files.list_directory(directory, 1, _LISTING_LIMIT), key=lambda item: item.path
        )
        for entry in entries:
            if entry.is_directory and entry.name in IGNORED_DIRECTORIES:
                continue
            if entry.is_directory and level < depth:
                queue.append((entry.path, level + 1))
            if entry.is_directory and not include_directories:
                continue
            if keep is not None and not keep(entry):
                continue
            if len(found) >= limit:
                return WalkResult(found, True)
            found.append(entry)
    return WalkResult(found, False)
