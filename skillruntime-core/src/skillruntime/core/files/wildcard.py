"""A wildcard matcher that cannot backtrack exponentially.

``*`` matches any run of characters (including none), ``?`` exactly one character, ``[...]`` one
character of a class (``[!...]`` or ``[^...]`` negated, ``a-z`` ranges, a ``]`` first in the class
is literal, an unclosed ``[`` is literal); every other character matches itself. Matching uses the
two-pointer algorithm with one remembered star, so a match costs at most
``O(len(pattern) * len(text))`` steps whatever the pattern. The same algorithm matches sequences of
any items: :func:`match_sequence` is used for path segments, where ``**`` plays the star.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

__all__ = [
    "STAR",
    "CharClass",
    "char_matches",
    "compile_wildcard",
    "match_sequence",
    "wildcard_match",
]

T = TypeVar("T")
P = TypeVar("P")


class _Star:
    """The ``*`` token (a singleton)."""

    def __repr__(self) -> str:
        return "STAR"


STAR = _Star()
"""Token that matches any run of items (including none)."""


@dataclass(frozen=True)
class CharClass:
    """One bracket expression: literal characters and inclusive ranges, possibly negated."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def matches(self, char: str) -> bool:
        """True when ``char`` is in the class (or not in it, for a negated class)."""
        inside = char in self.chars or any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated


class _AnyChar:
    def __repr__(self) -> str:
        return "ANY"


_ANY = _AnyChar()
Token = str | CharClass | _AnyChar | _Star


def _parse_class(pattern: str, start: int) -> tuple[CharClass, int] | None:
    index = start + 1
    negated = index < len(pattern) and pattern[index] in "!^"
    if negated:
        index += 1
    body_start = index
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 1
    if index >= len(pattern):
        return None
    body = pattern[body_start:index]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    position = 0
    while position < len(body):
        if position + 2 < len(body) and body[position + 1] == "-":
            ranges.append((body[position], body[position + 2]))
            position += 3
        else:
            chars.add(body[position])
            position += 1
    return CharClass(frozenset(chars), tuple(ranges), negated), index + 1


@lru_cache(maxsize=1024)
def compile_wildcard(pattern: str) -> tuple[Token, ...]:
    """Tokenize ``pattern`` (rules in the module docstring); consecutive stars collapse."""
    tokens: list[Token] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            if not tokens or tokens[-1] is not STAR:
                tokens.append(STAR)
            index += 1
        elif char == "?":
            tokens.append(_ANY)
            index += 1
        elif char == "[" and (parsed := _parse_class(pattern, index)) is not None:
            tokens.append(parsed[0])
            index = parsed[1]
        else:
            tokens.append(char)
            index += 1
    return tuple(tokens)


def char_matches(token: object, char: str) -> bool:
    """True when one compiled non-star token matches the single character ``char``."""
    if isinstance(token, str):
        return token == char
    if isinstance(token, CharClass):
        return token.matches(char)
    return token is _ANY


def match_sequence(
    tokens: Sequence[P], items: Sequence[T], matches: Callable[[P, T], bool], star: P
) -> bool:
    """True when ``items`` match ``tokens``; ``star`` matches any run of items, others one item.

    ``matches(token, item)`` decides a single non-star token. Linear two-pointer search with one
    remembered star: at most ``len(tokens) * len(items)`` calls of ``matches``.
    """
    token_index = item_index = 0
    star_index = -1
    resume = 0
    while item_index < len(items):
        if token_index < len(tokens) and tokens[token_index] is star:
            star_index = token_index
            resume = item_index
            token_index += 1
        elif token_index < len(tokens) and matches(tokens[token_index], items[item_index]):
            token_index += 1
            item_index += 1
        elif star_index >= 0:
            token_index = star_index + 1
            resume += 1
            item_index = resume
        else:
            return False
    while token_index < len(tokens) and tokens[token_index] is star:
        token_index += 1
    return token_index == len(tokens)


def wildcard_match(pattern: str, text: str) -> bool:
    """True when all of ``text`` matches the wildcard ``pattern``."""
    tokens: tuple[Token, ...] = compile_wildcard(pattern)
    return match_sequence(tokens, text, char_matches, STAR)
