"""Classify a shell command as exactly one simple command of literal words, or refuse it.

A constrained ``Bash(...)`` entry admits a command only when this module can say, with a real bash
grammar (tree-sitter's ``tree-sitter-bash``), that bash will run *one* program with *these* words.
The parse tree supplies the structure; every word's value is then computed from its source text the
way bash performs quote removal, and anything that bash would expand, redirect, substitute, split,
join or treat as syntax is refused. The checker fails closed: an ``ERROR``/``MISSING`` node, a node
type it does not know, or a character it cannot classify is a refusal with a reason.

Admitted: words made of unquoted *plain* characters (ASCII letters and digits, ``-_./,:@%+=^``,
and printable non-ASCII characters), backslash escapes outside quotes (``\\X`` is ``X``), single
quotes (``'...'``, verbatim) and double quotes without expansions (``"..."`` where ``\\``
escapes only ``\\``, ``"``, ``$`` and the backtick), concatenated without blanks; words are
separated by spaces or tabs. Refused: everything else, in particular control operators,
redirections, pipelines, comments, assignments, expansions and substitutions of any kind,
``$'...'`` and ``$"..."`` strings, unquoted glob (``*?[``), brace (``{}``), tilde (``~``), ``#``,
``!`` and control characters, line continuations, a first word containing ``=`` and a first word
that is a reserved word.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = [
    "MAX_COMMAND_CHARS",
    "RESERVED_WORDS",
    "UnclassifiedCommandError",
    "WordSpan",
    "command_word_spans",
    "simple_command_words",
]

MAX_COMMAND_CHARS = 100_000
"""Longer commands are refused unparsed, which bounds the cost of a check."""

RESERVED_WORDS = frozenset(
    {
        "!",
        "[[",
        "]]",
        "{",
        "}",
        "case",
        "coproc",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
    }
)
"""Bash reserved words; a command whose first word is one of them is refused."""

_PLAIN_ASCII = frozenset(string.ascii_letters + string.digits + "-_./,:@%+=^")
_BLANKS = frozenset(" \t")
_WORD_TYPES = frozenset({"word", "number"})
_ARGUMENT_TYPES = frozenset({"word", "number", "string", "raw_string", "concatenation"})
_DOUBLE_QUOTE_ESCAPES = frozenset('\\"$`')
_MASK_NON_ASCII = bytes(range(128)) + b"a" * 128
"""Byte map giving the grammar an ASCII-only copy of a command (see simple_command_words)."""
_CONTINUATION = "it contains a line continuation (backslash-newline)"

_DESCRIPTIONS = {
    "command_substitution": "a command substitution $(...) or `...`",
    "process_substitution": "a process substitution <(...) or >(...)",
    "simple_expansion": "a parameter expansion $NAME",
    "expansion": "a parameter expansion ${...}",
    "arithmetic_expansion": "an arithmetic expansion $((...))",
    "ansi_c_string": "an ANSI-C quoted string $'...' (not decoded: quote with '...' instead)",
    "translated_string": 'a locale-translated string $"..."',
    "variable_assignment": "a variable assignment",
    "comment": "a comment",
    "heredoc_redirect": "a here-document",
    "herestring_redirect": "a here-string <<<",
    "brace_expression": "a brace expansion {...}",
    "test_command": "a test expression [[ ... ]]",
    "subshell": "a subshell (...)",
    "compound_statement": "a command group { ...; }",
    "function_definition": "a function definition",
    "negated_command": "a negation !",
}
_OPERATOR_PARENTS = frozenset(
    {"list", "pipeline", "program", "redirected_statement", "file_redirect", "heredoc_redirect"}
)


class UnclassifiedCommandError(ValueError):
    """The command is not provably one simple command of literal words; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@lru_cache(maxsize=1)
def _language() -> Language:
    return Language(tree_sitter_bash.language())


def simple_command_words(command: str) -> tuple[str, ...]:
    """The words bash would pass to ``execve`` for ``command``, the command name first.

    Raises :class:`UnclassifiedCommandError` (a :class:`ValueError`) with a reason such as "it
    contains the control operator ';'" when ``command`` is not exactly one simple command whose
    words are all literals (rules in the module docstring), or is longer than
    :data:`MAX_COMMAND_CHARS`. Nothing else is raised, however long or deeply nested the input:
    the syntax tree is walked without recursion.

    The grammar parses a copy in which every byte of a non-ASCII character is replaced by ``a``:
    bash never treats a non-ASCII character as syntax or as a blank, so the structure is the
    same, and the native scanner of the grammar never sees unusual code points (some crash it).
    Word values are computed from the original text at the same byte offsets.
    """
    if not command.strip(" \t"):
        raise UnclassifiedCommandError("it is empty")
    if len(command) > MAX_COMMAND_CHARS:
        raise UnclassifiedCommandError(f"it is longer than {MAX_COMMAND_CHARS} characters")
    try:
        source = command.encode("utf-8")
    except UnicodeEncodeError:
        raise UnclassifiedCommandError("it is not valid Unicode text") from None
    if b"\x00" in source:
        raise UnclassifiedCommandError("it contains a NUL character")
    tree = Parser(_language()).parse(source.translate(_MASK_NON_ASCII))
    return _words(source, tree.root_node)


@dataclass(frozen=True)
class WordSpan:
    """One word of a simple command: its literal value and where it is in the command text.

    ``value`` is the word after quote removal, or ``None`` when the word is not a literal (it
    holds an expansion, a substitution, an unquoted glob, …). ``start``/``end`` are character
    offsets of the whole word, quotes included: ``command[start:end]``.
    """

    value: str | None
    start: int
    end: int


_STRUCTURE_TYPES = frozenset(
    {
        *("program", "list", "pipeline", "redirected_statement", "negated_command", "subshell"),
        *("compound_statement", "if_statement", "elif_clause", "else_clause", "while_statement"),
        *("for_statement", "c_style_for_statement", "do_group", "case_statement", "case_item"),
        "function_definition",
    }
)
"""Nodes whose commands run in the command's own shell, as written (not inside a word)."""


def command_word_spans(command: str) -> list[tuple[WordSpan, ...]] | None:
    """The simple commands of ``command``'s structure, each as its words (name first).

    Commands inside lists, pipelines and compound commands count; words of a command hold no
    commands (a substitution ``$(...)`` or code in a string such as ``sh -c '...'`` is one word,
    not looked into), and assignments and redirections are left out. ``None`` when the command
    is empty, longer than :data:`MAX_COMMAND_CHARS`, not valid shell syntax or holds a NUL. The
    tree is walked without recursion.
    """
    if not command.strip() or len(command) > MAX_COMMAND_CHARS:
        return None
    try:
        source = command.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if b"\x00" in source:
        return None
    root = Parser(_language()).parse(source.translate(_MASK_NON_ASCII)).root_node
    if root.has_error:
        return None

    starts = [index for index, byte in enumerate(source) if byte & 0xC0 != 0x80]
    starts.append(len(source))
    char_at = {byte: char for char, byte in enumerate(starts)}

    def offset(byte: int) -> int:
        return char_at[byte]

    commands: list[tuple[WordSpan, ...]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _STRUCTURE_TYPES:
            stack.extend(reversed(node.children))
            continue
        if node.type != "command":
            continue
        words: list[WordSpan] = []
        for child in node.children:
            if child.type == "command_name" and len(child.children) == 1:
                part = child.children[0]
            elif child.type in _ARGUMENT_TYPES and words:
                part = child
            else:
                continue
            try:
                value: str | None = _word_value(source, part)
            except UnclassifiedCommandError:
                value = None
            words.append(WordSpan(value, offset(child.start_byte), offset(child.end_byte)))
        if words:
            commands.append(tuple(words))
    return commands


def _words(source: bytes, root: Node) -> tuple[str, ...]:
    offender = _first_offender(root)
    if offender is not None:
        raise UnclassifiedCommandError(offender)
    if len(root.children) > 1:
        raise UnclassifiedCommandError("it holds more than one command")
    if len(root.children) != 1 or root.children[0].type != "command":
        raise UnclassifiedCommandError("it is not exactly one simple command")
    node = root.children[0]
    _require_blanks(source, 0, node.start_byte)
    _require_blanks(source, node.end_byte, len(source))
    words: list[str] = []
    previous_end = node.start_byte
    for index, child in enumerate(node.children):
        if index == 0:
            if child.type != "command_name" or len(child.children) != 1:
                raise UnclassifiedCommandError("it does not start with a command name")
            part = child.children[0]
        elif child.type in _ARGUMENT_TYPES:
            part = child
        else:
            raise UnclassifiedCommandError(_describe(child))
        if index > 0:
            if child.start_byte == previous_end:
                raise UnclassifiedCommandError("two of its words are not separated by a blank")
            _require_blanks(source, previous_end, child.start_byte)
        words.append(_word_value(source, part))
        previous_end = child.end_byte
    if not words:
        raise UnclassifiedCommandError("it has no command name")
    first = words[0]
    if first in RESERVED_WORDS:
        raise UnclassifiedCommandError(f"it starts with the reserved word {first!r}")
    if "=" in first:
        raise UnclassifiedCommandError("its first word contains '=' (an assignment)")
    return tuple(words)


def _walk(root: Node) -> Iterator[tuple[Node, str]]:
    """Every node under ``root`` in pre-order with its parent's type, without recursion (a deep
    tree, e.g. thousands of ``&&`` or nested ``if``, must not reach Python's recursion limit)."""
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, parent_type = stack.pop()
        yield node, parent_type
        stack.extend((child, node.type) for child in reversed(node.children))


def _first_offender(root: Node) -> str | None:
    for node, parent_type in _walk(root):
        if node.is_missing:
            return f"it is not valid shell syntax (a {node.type!r} is missing)"
        if node.is_error or node.type == "ERROR":
            return "it is not valid shell syntax"
        if node.type in _DESCRIPTIONS:
            return f"it contains {_DESCRIPTIONS[node.type]}"
        if not node.is_named:
            if parent_type in _OPERATOR_PARENTS:
                return _operator_reason(node.type)
            if node.type in {"$(", "`"}:
                return f"it contains {_DESCRIPTIONS['command_substitution']}"
    return None


def _operator_reason(token: str) -> str:
    if token in {"\n", "\r\n"}:
        return "it contains a newline"
    return f"it contains the control operator {token!r}"


def _describe(node: Node) -> str:
    if node.type in _DESCRIPTIONS:
        return f"it contains {_DESCRIPTIONS[node.type]}"
    if node.type.endswith("redirect"):
        return "it contains a redirection"
    return f"it contains a {node.type!r} construct the checker does not classify"


def _require_blanks(source: bytes, start: int, end: int) -> None:
    gap = source[start:end].decode("utf-8")
    for char in gap:
        if char not in _BLANKS:
            raise UnclassifiedCommandError(_unquoted_reason(char))


def _word_value(source: bytes, node: Node) -> str:
    if node.type == "concatenation":
        parts = node.children
        if not parts:
            raise UnclassifiedCommandError("it contains an empty concatenation")
        position = node.start_byte
        value = []
        for part in parts:
            if part.start_byte != position or part.type == "concatenation":
                raise UnclassifiedCommandError("it contains a word the checker does not classify")
            value.append(_word_value(source, part))
            position = part.end_byte
        if position != node.end_byte:
            raise UnclassifiedCommandError("it contains a word the checker does not classify")
        return "".join(value)
    text = source[node.start_byte : node.end_byte].decode("utf-8")
    if node.type in _WORD_TYPES:
        if node.children:
            raise UnclassifiedCommandError(_describe(node.children[0]))
        return _unquoted_value(text)
    if node.type == "raw_string":
        if len(text) < 2 or text[0] != "'" or text[-1] != "'" or "'" in text[1:-1]:
            raise UnclassifiedCommandError("it contains a single-quoted string it cannot read")
        return text[1:-1]
    if node.type == "string":
        if any(child.type not in {'"', "string_content"} for child in node.children):
            bad = next(c for c in node.children if c.type not in {'"', "string_content"})
            raise UnclassifiedCommandError(_describe(bad))
        if len(text) < 2 or text[0] != '"' or text[-1] != '"':
            raise UnclassifiedCommandError("it contains a double-quoted string it cannot read")
        return _double_quoted_value(text[1:-1])
    raise UnclassifiedCommandError(_describe(node))


def _unquoted_value(text: str) -> str:
    value: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 >= len(text):
                raise UnclassifiedCommandError("it ends a word with a lone backslash")
            escaped = text[index + 1]
            if escaped in "\r\n":
                raise UnclassifiedCommandError(_CONTINUATION)
            value.append(escaped)
            index += 2
            continue
        if not _is_plain(char):
            raise UnclassifiedCommandError(_unquoted_reason(char))
        value.append(char)
        index += 1
    return "".join(value)


def _double_quoted_value(inner: str) -> str:
    value: list[str] = []
    index = 0
    while index < len(inner):
        char = inner[index]
        if char == "\\":
            if index + 1 >= len(inner):
                raise UnclassifiedCommandError("it contains a double-quoted string it cannot read")
            escaped = inner[index + 1]
            if escaped in "\r\n":
                raise UnclassifiedCommandError(_CONTINUATION)
            if escaped in _DOUBLE_QUOTE_ESCAPES:
                value.append(escaped)
            else:
                value.append(char + escaped)
            index += 2
            continue
        if char in '$`"':
            what = "an expansion ($)" if char == "$" else f"an unescaped {char!r}"
            raise UnclassifiedCommandError(f"it contains {what} inside double quotes")
        value.append(char)
        index += 1
    return "".join(value)


def _is_plain(char: str) -> bool:
    if char.isascii():
        return char in _PLAIN_ASCII
    return unicodedata.category(char)[0] not in {"C", "Z"}


def _unquoted_reason(char: str) -> str:
    if char in "*?[]":
        return f"it contains the unquoted glob character {char!r} (quote it to pass it literally)"
    if char in "{}":
        return f"it contains the unquoted brace {char!r} (brace expansion; quote it)"
    if char == "~":
        return "it contains an unquoted '~' (tilde expansion; quote it)"
    if char in ";&|<>()":
        return f"it contains the control operator {char!r}"
    if char == "$":
        return "it contains an expansion ($)"
    if char == "`":
        return "it contains a backtick command substitution"
    if char == "#":
        return "it contains an unquoted '#' (a comment in bash; quote it)"
    if char == "\n":
        return "it contains a newline"
    if char == "\r":
        return "it contains a carriage return"
    if char == "\\":
        return _CONTINUATION
    if not char.isprintable() or unicodedata.category(char)[0] in {"C", "Z"}:
        return f"it contains the character U+{ord(char):04X} outside quotes"
    return f"it contains the unquoted character {char!r} (quote it)"
