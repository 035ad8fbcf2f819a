"""Skill policy: ``allowed-tools``, constrained ``Bash(...)`` commands and ``metadata.requires``.

Rules (``docs/tools.md``, "Policy"):

* A skill without ``allowed-tools`` does not restrict tools. With it, only the listed tools are
  allowed; the effective set is the **intersection** over every activated skill.
* ``allowed-tools`` is a YAML list or a string split on whitespace/commas outside parentheses, so
  ``Bash(git:*) Bash(python *) Read`` is three entries (one splitter,
  :func:`skillruntime.core.skills.allowed_tools.split_allowed_tools`, also behind
  ``Skill.allowed_tools``). Heads are case-insensitive and mapped to the tool names of this
  package (``Bash``/``exec``/``shell`` → ``bash``, ``Read``/``read_file`` → ``read``, ``LS`` →
  ``ls``, …); unknown heads name tools outside this tool set and grant nothing.
* A constrained command is admitted only when the bash grammar says it is exactly one simple
  command of literal words (:mod:`.simple_command`: no operators, redirections, expansions,
  substitutions, assignments, comments, unquoted glob/brace/tilde characters); the pattern is then
  matched against the words bash will pass to the program, after quote removal.
  ``Bash(prefix:*)`` admits the words of ``prefix`` alone or followed by any arguments; any other
  body is split on whitespace into pattern words: a lone ``*`` matches one or more whole words,
  every other pattern word matches exactly one word as a wildcard (:mod:`.wildcard`: ``*``, ``?``,
  ``[...]``). A body may hold alternatives separated by ``|``. Several patterns of one skill are
  alternatives; several skills must all agree. A plain ``Bash`` entry in a skill lifts that
  skill's constraint. This is a literal allow-list of single commands, not a sandbox: an admitted
  program may itself run anything.
* Patterns fail closed: a body the parser cannot classify (:func:`pattern_defect`: empty or blank,
  an empty ``|`` alternative, parentheses or control characters inside it, a ``:*`` that is not
  the end of an alternative or follows an empty or wildcard prefix, an unclosed ``[``) admits no
  command and never lifts the constraint; ``Bash()`` is such a pattern, not a plain ``Bash``.
* Argument constraints exist only for ``bash``; a constrained entry for another tool (``Read(x)``)
  allows nothing unless the same skill also lists the plain tool.
* ``metadata.requires`` (``bins`` and ``env``, lists or single strings) is checked inside the
  runtime: ``command -v`` for each binary and ``${NAME+x}`` for each variable, so values are never
  read or shown.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..files.wildcard import STAR, match_sequence, wildcard_match
from ..models import ENV_NAME_PATTERN, Skill, SkillExecutionRequest, SkillExecutionResult
from ..runtime.spi import SkillRuntime
from ..skills.allowed_tools import split_allowed_tools
from .simple_command import UnclassifiedCommandError, simple_command_words

__all__ = [
    "REQUIREMENTS_TIMEOUT_SECONDS",
    "TOOL_ALIASES",
    "Requirements",
    "SkillPolicy",
    "ToolSpec",
    "check_requirements",
    "command_matches",
    "compound_command_reason",
    "effective_allowed_tools",
    "missing_requirements",
    "parse_allowed_tools",
    "pattern_defect",
    "refusal_reason",
    "requirements_request",
    "words_match",
]

logger = logging.getLogger(__name__)

REQUIREMENTS_TIMEOUT_SECONDS = 10.0
"""Timeout of the in-runtime ``metadata.requires`` check."""

TOOL_ALIASES: Mapping[str, str] = {
    "bash": "bash",
    "exec": "bash",
    "shell": "bash",
    "read": "read",
    "read_file": "read",
    "write": "write",
    "write_file": "write",
    "edit": "edit",
    "edit_file": "edit",
    "multiedit": "edit",
    "ls": "ls",
    "list": "ls",
    "glob": "glob",
    "grep": "grep",
    "publish_file": "publish_file",
    "publish": "publish_file",
    "skill": "skill",
}
"""``allowed-tools`` heads (lowercased) mapped to tool names of this package."""

_BIN_PATTERN = re.compile(r"[^\x00-\x1f/][^\x00-\x1f]*")


@dataclass(frozen=True)
class ToolSpec:
    """One ``allowed-tools`` entry: the tool it names and its argument constraint, if any.

    ``constraint`` is ``None`` only for an entry without parentheses (``Bash``); ``Bash()`` has
    the constraint ``""``. ``defect`` says why a ``bash`` constraint cannot be classified
    (:func:`pattern_defect`); such a constraint admits no command.
    """

    tool: str
    constraint: str | None = None
    raw: str = ""
    defect: str | None = field(default=None, compare=False)


_WILDCARD_CHARACTERS = frozenset("*?[")


def _unclosed_bracket(word: str) -> bool:
    """Whether ``word`` has a ``[`` that opens no class (read like :mod:`.wildcard` does)."""
    index = 0
    while index < len(word):
        if word[index] != "[":
            index += 1
            continue
        end = index + 1
        if end < len(word) and word[end] in "!^":
            end += 1
        if end < len(word) and word[end] == "]":
            end += 1
        close = word.find("]", end)
        if close < 0:
            return True
        index = close + 1
    return False


def pattern_defect(body: str) -> str | None:
    """Why the ``Bash(...)`` pattern ``body`` cannot be classified (``None`` when it can).

    Refused (such a pattern admits no command): an empty or blank body, an empty ``|``
    alternative, parentheses or non-blank control characters, ``:*`` anywhere but at the end of an
    alternative, a ``:*`` prefix that is empty or holds a wildcard character (``*?[``; the prefix is
    compared literally) and a word with an unclosed ``[``.
    """
    if not body.strip():
        return "the pattern is empty"
    if "(" in body or ")" in body:
        return "the pattern holds a parenthesis"
    if any(not char.isprintable() and not char.isspace() for char in body):
        return "the pattern holds a control character"
    for raw_alternative in body.split("|"):
        alternative = raw_alternative.strip()
        if not alternative:
            return "the pattern has an empty '|' alternative"
        prefix, colon_star, rest = alternative.partition(":*")
        if colon_star:
            if rest:
                return "':*' is not at the end of its alternative"
            if not prefix.strip():
                return "the ':*' prefix is empty"
            if any(char in _WILDCARD_CHARACTERS for char in prefix):
                return "the ':*' prefix holds a wildcard character"
            continue
        if any(_unclosed_bracket(word) for word in alternative.split()):
            return "the pattern holds an unclosed '['"
    return None


def _parse_entry(entry: str) -> ToolSpec:
    entry = entry.strip()
    head, paren, rest = entry.partition("(")
    head = head.strip().lower()
    if not head:
        raise ValueError(f"allowed-tools entry has no tool name: {entry!r}")
    tool = TOOL_ALIASES.get(head, head)
    if not paren:
        return ToolSpec(tool=tool, raw=entry)
    if not rest.endswith(")"):
        raise ValueError(f"allowed-tools entry must end with ')': {entry!r}")
    body = rest[:-1].strip()
    defect = pattern_defect(body) if tool == "bash" else None
    return ToolSpec(tool=tool, constraint=body, raw=entry, defect=defect)


def parse_allowed_tools(raw: Any) -> tuple[ToolSpec, ...] | None:
    """Parse a frontmatter ``allowed-tools`` value; ``None`` means "not declared".

    A ``bash`` pattern the parser cannot classify is kept with its :attr:`ToolSpec.defect` and
    admits no command (fail closed). Raises :class:`ValueError` for unbalanced parentheses or
    an entry without a tool name.
    """
    entries = split_allowed_tools(raw)
    if entries is None:
        return None
    return tuple(_parse_entry(entry) for entry in entries)


def compound_command_reason(command: str) -> str | None:
    """Why ``command`` is not one simple command of literal words (``None`` when it is one)."""
    try:
        simple_command_words(command)
    except UnclassifiedCommandError as exc:
        return exc.reason
    return None


class _AnyWord:
    """Pattern token matching exactly one word (the first word of a lone ``*``)."""


_ANY_WORD = _AnyWord()


def _word_token_matches(token: object, word: str) -> bool:
    return token is _ANY_WORD or (isinstance(token, str) and wildcard_match(token, word))


def words_match(pattern: str, words: Sequence[str]) -> bool:
    """True when the command ``words`` match one ``Bash(...)`` pattern body (rules above).

    Always false for a pattern with a :func:`pattern_defect`.
    """
    if pattern_defect(pattern) is not None:
        return False
    for raw_alternative in pattern.split("|"):
        alternative = raw_alternative.strip()
        if alternative.endswith(":*"):
            prefix = alternative[:-2].split()
            if prefix and tuple(words[: len(prefix)]) == tuple(prefix):
                return True
            continue
        tokens: list[object] = []
        for pattern_word in alternative.split():
            tokens.extend((_ANY_WORD, STAR) if pattern_word == "*" else (pattern_word,))
        if match_sequence(tokens, words, _word_token_matches, STAR):
            return True
    return False


def command_matches(pattern: str, command: str) -> bool:
    """True when ``command`` is one literal simple command whose words match ``pattern``."""
    try:
        words = simple_command_words(command)
    except UnclassifiedCommandError:
        return False
    return words_match(pattern, words)


@dataclass(frozen=True)
class Requirements:
    """``metadata.requires`` of a skill: binaries on ``PATH`` and environment variable names."""

    bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.bins or self.env)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Requirements:
        """Read ``metadata.requires`` (or ``metadata.vikingbot.requires``); validate the names."""
        requires = metadata.get("requires")
        if requires is None and isinstance(metadata.get("vikingbot"), Mapping):
            requires = metadata["vikingbot"].get("requires")
        if requires is None:
            return cls()
        if not isinstance(requires, Mapping):
            raise ValueError("metadata.requires must be a mapping with 'bins' and/or 'env'")
        bins = _string_items(requires.get("bins"), "metadata.requires.bins")
        env = _string_items(requires.get("env"), "metadata.requires.env")
        for name in bins:
            if not _BIN_PATTERN.fullmatch(name) or "/" in name:
                raise ValueError(f"metadata.requires.bins entry is not a command name: {name!r}")
        for name in env:
            if not ENV_NAME_PATTERN.fullmatch(name):
                raise ValueError(
                    f"metadata.requires.env entry {name!r} is not a valid variable name"
                )
        return cls(bins=bins, env=env)


def _string_items(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValueError(f"{where} must be a string or a list of strings")
    return tuple(str(item).strip() for item in value if str(item).strip())


def _requirements_script(requirements: Requirements) -> str:
    lines = []
    for name in requirements.bins:
        quoted = shlex.quote(name)
        lines.append(f"command -v -- {quoted} >/dev/null 2>&1 || printf 'bin %s\\n' {quoted}")
    for name in requirements.env:
        lines.append(f"[ -n \"${{{name}+x}}\" ] || printf 'env %s\\n' {name}")
    lines.append("exit 0")
    return "\n".join(lines)


def check_requirements(runtime: SkillRuntime, requirements: Requirements) -> list[str]:
    """Check ``requirements`` inside ``runtime``; return the missing items (empty when all met).

    Items are named ``bin <name>`` / ``env <NAME>``. Only presence is tested: no value is read.
    Raises :class:`RuntimeError` when the check itself could not run to completion.
    """
    if not requirements:
        return []
    return missing_requirements(runtime.name, runtime.execute(requirements_request(requirements)))


def requirements_request(requirements: Requirements) -> SkillExecutionRequest:
    """The command that checks ``requirements`` inside a runtime."""
    return SkillExecutionRequest(
        command=_requirements_script(requirements),
        timeout_seconds=REQUIREMENTS_TIMEOUT_SECONDS,
    )


def missing_requirements(runtime_name: str, result: SkillExecutionResult) -> list[str]:
    """The missing items the check's ``result`` lists (raises when the check failed)."""
    if not result.ok:
        what = "timed out" if result.timed_out else f"exited with code {result.exit_code}"
        raise RuntimeError(f"the requirements check {what} in the {runtime_name} runtime")
    missing = []
    for line in result.stdout.splitlines():
        kind, _, name = line.strip().partition(" ")
        if kind in {"bin", "env"} and name:
            missing.append(f"{kind} {name}")
    return missing


@dataclass(frozen=True)
class SkillPolicy:
    """The tool policy one activated skill contributes."""

    skill_name: str
    allowed: tuple[ToolSpec, ...] | None
    requirements: Requirements = field(default_factory=Requirements)

    @classmethod
    def from_skill(cls, skill: Skill) -> SkillPolicy:
        """Build the policy of ``skill``; raises :class:`ValueError` for malformed frontmatter."""
        try:
            allowed = parse_allowed_tools(skill.frontmatter.get("allowed-tools"))
            requirements = Requirements.from_metadata(skill.metadata)
        except ValueError as exc:
            raise ValueError(f"skill '{skill.name}': {exc}") from exc
        for spec in allowed or ():
            if spec.defect is not None:
                logger.warning(
                    "skill %s: allowed-tools entry %r admits no command: %s",
                    skill.name,
                    spec.raw,
                    spec.defect,
                )
        return cls(skill_name=skill.name, allowed=allowed, requirements=requirements)

    def allows_tool(self, tool: str) -> bool:
        """True when this skill lets ``tool`` appear at all (constraints checked per call)."""
        if self.allowed is None:
            return True
        for spec in self.allowed:
            if spec.tool != tool:
                continue
            if spec.constraint is None or tool == "bash":
                return True
        return False

    def bash_reason(self, command: str) -> str | None:
        """Why this skill refuses ``command`` for ``bash`` (``None`` when it admits it)."""
        if self.allowed is None:
            return None
        specs = [spec for spec in self.allowed if spec.tool == "bash"]
        if not specs:
            return f"skill '{self.skill_name}' does not allow bash"
        if any(spec.constraint is None for spec in specs):
            return None
        patterns = [spec.constraint for spec in specs if spec.constraint and spec.defect is None]
        malformed = "".join(
            f" ({spec.raw} admits nothing: {spec.defect})" for spec in specs if spec.defect
        )
        try:
            words = simple_command_words(command)
        except UnclassifiedCommandError as exc:
            return (
                f"skill '{self.skill_name}' allows only single simple commands "
                f"({', '.join(spec.raw for spec in specs)}) and this command is refused "
                f"because {exc.reason}"
            )
        if any(words_match(pattern, words) for pattern in patterns):
            return None
        return (
            f"skill '{self.skill_name}' allows only commands matching "
            f"{', '.join(spec.raw for spec in specs)}{malformed}"
        )


def effective_allowed_tools(
    tool_names: Sequence[str], policies: Iterable[SkillPolicy], always_allowed: Collection[str]
) -> list[str]:
    """The tools of ``tool_names`` every policy allows (``always_allowed`` ones are kept)."""
    policies = list(policies)
    return [
        name
        for name in tool_names
        if name in always_allowed or all(policy.allows_tool(name) for policy in policies)
    ]


def refusal_reason(
    tool: str,
    arguments: Mapping[str, Any],
    policies: Iterable[SkillPolicy],
    always_allowed: Collection[str],
) -> str | None:
    """Why the active ``policies`` refuse this call (``None`` when every skill admits it)."""
    if tool in always_allowed:
        return None
    for policy in policies:
        if not policy.allows_tool(tool):
            return f"tool '{tool}' is not allowed by the active skill '{policy.skill_name}'"
        if tool == "bash":
            reason = policy.bash_reason(str(arguments.get("command", "")))
            if reason is not None:
                return reason
    return None
