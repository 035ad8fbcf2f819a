"""``glob`` and ``grep`` of the sandbox file system in one command through execd.

execd's own ``GET /files/search`` matches a glob against base names only, recursively, without
depth, noise-directory or count bounds, so it cannot give the walk the search contract asks for;
instead the runtime runs the command of :mod:`skillruntime.core.files.search_command` through its
command wrapper (one ``POST /command``), and the sync and async file systems parse its answer
with the helpers here. A command that failed, timed out or printed more than
:data:`SEARCH_OUTPUT_CAP` on a stream leaves the search to the default walk on the file API.
"""

from __future__ import annotations

import logging

from skillruntime.core.files.search import GlobQuery, GrepQuery, SearchResult
from skillruntime.core.files.search_command import (
    Listing,
    glob_from_listing,
    parse_glob_output,
    parse_grep_output,
    search_script,
)
from skillruntime.core.models import FileInfo, SkillExecutionRequest, SkillExecutionResult

__all__ = [
    "EXECUTABLE_BITS",
    "SEARCH_OUTPUT_CAP",
    "SEARCH_TIMEOUT_SECONDS",
    "glob_answer",
    "glob_request",
    "grep_found",
    "grep_request",
]

logger = logging.getLogger(__name__)

SEARCH_OUTPUT_CAP = 64 * 1024 * 1024
"""Bytes of the search command's output kept per stream (listing, archive)."""

SEARCH_TIMEOUT_SECONDS = 60.0
"""Deadline of one search command."""

EXECUTABLE_BITS = 0o100
"""The owner's execute bit: what makes a listed file executable for ``list_directory``."""


def _request(script: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(
        command="export LC_ALL=C; " + script,
        timeout_seconds=SEARCH_TIMEOUT_SECONDS,
        max_output_bytes=SEARCH_OUTPUT_CAP,
    )


def glob_request(root: FileInfo, query: GlobQuery) -> SkillExecutionRequest:
    """The command of a ``glob`` below the directory ``root``."""
    return _request(search_script(root.path, query.max_depth, content=None))


def grep_request(root: FileInfo, query: GrepQuery) -> SkillExecutionRequest:
    """The command of a ``grep`` below the directory ``root``."""
    return _request(search_script(root.path, query.max_depth, content=query))


def _complete(result: SkillExecutionResult) -> bool:
    if result.exit_code != 0 or result.timed_out:
        logger.debug("search command failed (exit %d); walking instead", result.exit_code)
        return False
    if result.stdout_truncated or result.stderr_truncated:
        logger.debug("search output over the cap; walking instead")
        return False
    return True


def glob_answer(
    result: SkillExecutionResult, root: FileInfo, query: GlobQuery
) -> SearchResult | None:
    """The ``glob`` result from the command's answer; ``None``: walk instead."""
    if not _complete(result):
        return None
    listing = parse_glob_output(
        result.stdout.encode(), executable_bits=EXECUTABLE_BITS, microseconds=True
    )
    return None if listing is None else glob_from_listing(listing, root, query)


def grep_found(result: SkillExecutionResult) -> tuple[Listing, dict[str, bytes]] | None:
    """The listing and archived files of a ``grep`` command's answer; ``None``: walk instead."""
    if not _complete(result):
        return None
    return parse_grep_output(
        result.stdout.encode(), result.stderr.encode(), executable_bits=EXECUTABLE_BITS
    )
