"""Linear-time regular expressions for ``grep``: RE2 through the ``google-re2`` binding.

RE2 runs in time linear in the size of the text (times the size of the pattern) whatever the
pattern, so a model-supplied expression such as ``(a+)+$`` cannot stall a search. The syntax is
Perl/Python-like (classes, ``\\d\\w\\s\\b``, ``(?i)``, non-greedy ``*?``, named groups
``(?P<n>...)``); what needs backtracking, backreferences (``\\1``) and lookaround (``(?=``,
``(?!``, ``(?<=``, ``(?<!``), is refused at compile time with :class:`InvalidPatternError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]

from ..errors import InvalidPatternError

__all__ = ["InvalidPatternError", "LinearPattern"]

_MAX_PROGRAM_MEMORY = 64 * 1024 * 1024


class LinearPattern:
    """One compiled RE2 expression; ``^``/``$`` match at line boundaries.

    ``case_insensitive`` ignores case; ``dot_matches_newline`` lets ``.`` match ``\\n``.
    """

    def __init__(
        self, pattern: str, *, case_insensitive: bool = False, dot_matches_newline: bool = False
    ) -> None:
        options = re2.Options()
        options.log_errors = False
        options.case_sensitive = not case_insensitive
        options.dot_nl = dot_matches_newline
        options.max_mem = _MAX_PROGRAM_MEMORY
        self.pattern = pattern
        try:
            self._compiled: Any = re2.compile("(?m)" + pattern, options)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise InvalidPatternError(
                f"{detail} (grep uses RE2 syntax, which runs in linear time: backreferences "
                "and lookaround are not supported)"
            ) from None

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in ``text``."""
        return self._compiled.search(text) is not None

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` character offsets of successive non-overlapping matches."""
        for match in self._compiled.finditer(text):
            start, end = match.span()
            yield int(start), int(end)
