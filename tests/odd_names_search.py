"""The answer of the local runtime's ``glob``/``grep`` over file names a line-wise or UTF-8-only
listing corrupts (newline, carriage return, tab, undecodable bytes): the reference the
one-command searches of the sandbox runtimes are compared with, paths relative to the root."""

from __future__ import annotations

import math
from pathlib import Path

from skillruntime.core.files.search import GlobQuery, GrepQuery, GrepResult, SearchResult
from skillruntime.core.testing.search_contracts import odd_files, odd_names, write_tree
from skillruntime.local import LocalSkillRuntime

__all__ = ["BASE", "GLOB", "GREPS", "OddAnswer", "answer", "local_answer", "odd_names"]

BASE = "odd-tree"
"""Directory (relative to the working directory) the odd files are created in."""

GLOB = GlobQuery("**/*")
GREPS = (
    GrepQuery("needle", time_budget=math.inf),
    GrepQuery("needle", output_mode="content", before=1, time_budget=math.inf),
)

OddAnswer = tuple[list[tuple[str, int]], list[list[str]]]
"""Globbed (relative path, size) pairs and the entries of each of :data:`GREPS`, relative."""


def _relative(entry: str, root: str) -> str:
    prefix = root.rstrip("/") + "/"
    return entry[len(prefix) :] if entry.startswith(prefix) else entry


def answer(root: str, globbed: SearchResult, grepped: list[GrepResult]) -> OddAnswer:
    """The results of :data:`GLOB` and :data:`GREPS` below ``root``, relative to it."""
    assert not globbed.truncated
    assert not any(result.truncated or result.out_of_time for result in grepped)
    return (
        [(_relative(entry.path, root), entry.size) for entry in globbed.entries],
        [[_relative(entry, root) for entry in result.entries] for result in grepped],
    )


def local_answer(tmp_path: Path) -> OddAnswer:
    """The local runtime's answer over the odd names, written by the same shell command."""
    with LocalSkillRuntime(conversation_id="odd-names", conversations_root=tmp_path) as runtime:
        write_tree(runtime, BASE, odd_files())
        fs = runtime.get_file_system()
        root = fs.stat(BASE)
        assert root is not None
        found = answer(root.path, fs.glob(root, GLOB), [fs.grep(root, q) for q in GREPS])
    assert len(found[0]) == len(odd_names())
    return found
