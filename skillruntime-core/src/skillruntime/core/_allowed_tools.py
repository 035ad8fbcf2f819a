"""The one reader of a frontmatter ``allowed-tools`` value into its entries (the ground layer).

A string is split on whitespace and commas *outside parentheses*, so
``"Bash(git:*) Bash(python *), Read"`` is the three entries ``Bash(git:*)``, ``Bash(python *)`` and
``Read``; a list contributes each item split the same way. Both
:attr:`Skill.allowed_tools <skillruntime.core.models.Skill.allowed_tools>` and the tool policy
(:func:`skillruntime.core.tools.policy.parse_allowed_tools`) read entries through here. It sits
below :mod:`skillruntime.core.models`, which uses it; its public home is
:mod:`skillruntime.core.skills.allowed_tools`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["split_allowed_tools"]


def _split_entries(text: str) -> list[str]:
    entries: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"allowed-tools has an unbalanced ')': {text!r}")
        if depth == 0 and (char.isspace() or char == ","):
            if current:
                entries.append("".join(current))
                current = []
            continue
        current.append(char)
    if depth != 0:
        raise ValueError(f"allowed-tools has an unbalanced '(': {text!r}")
    if current:
        entries.append("".join(current))
    return entries


def split_allowed_tools(raw: Any) -> tuple[str, ...] | None:
    """The entries of an ``allowed-tools`` value; ``None`` when it is ``None`` (not declared).

    A list or tuple contributes every item (as text) split like a string; any other value is read
    as its text. Raises :class:`ValueError` for unbalanced parentheses.
    """
    if raw is None:
        return None
    items: Iterable[Any] = raw if isinstance(raw, list | tuple) else [raw]
    entries: list[str] = []
    for item in items:
        entries.extend(_split_entries(str(item)))
    return tuple(entries)
