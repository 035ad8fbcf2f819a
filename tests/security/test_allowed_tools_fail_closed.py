"""``allowed-tools`` patterns fail closed: what the parser cannot classify admits nothing.

Properties (hypothesis):

* a ``Bash(...)`` body with a :func:`pattern_defect` admits no command, whatever the command;
* adding a malformed pattern to a skill's ``allowed-tools`` never admits a command the skill
  refused before (the admitted set never grows) — in particular ``Bash()`` and ``Bash( )`` are
  not a plain ``Bash``;
* :func:`words_match` agrees with an independent regular-expression matcher on every well-formed
  pattern (differential check).

And end to end: a skill with ``allowed-tools: Bash(echo:*) Bash()`` does not run ``touch``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.policy import (
    SkillPolicy,
    parse_allowed_tools,
    pattern_defect,
    words_match,
)
from skillruntime.local import LocalSkillRuntime

PATTERN_CHARS = "ab*?[]!^-:"
WORD_CHARS = "ab*?[]!^-:"

COMMAND_WORD = st.text(st.sampled_from(list(WORD_CHARS)), min_size=1, max_size=4)
COMMAND_WORDS = st.lists(COMMAND_WORD, min_size=1, max_size=4)
PATTERN_WORD = st.one_of(
    st.just("*"), st.text(st.sampled_from(list(PATTERN_CHARS)), min_size=1, max_size=4)
)
ALTERNATIVE = st.one_of(
    st.lists(PATTERN_WORD, min_size=1, max_size=3).map(" ".join),
    st.lists(st.text(st.sampled_from(list("ab-")), min_size=1, max_size=3), min_size=1, max_size=2)
    .map(" ".join)
    .map(lambda prefix: prefix + ":*"),
)
BODY = st.lists(ALTERNATIVE, min_size=1, max_size=3).map(" | ".join)
MALFORMED = st.one_of(
    st.sampled_from(
        [
            *("", " ", "\t", "  \t ", "|", "a|", "|a", "a||b", ":*", " :*", "a:* b", "*:*"),
            *("a?:*", "[ab", "a [", "echo\x01", "a\x7f", "(a)", "a (b)", "echo:*:*"),
        ]
    ),
    st.text(st.sampled_from(list(PATTERN_CHARS + " |()\x01")), max_size=8).filter(
        lambda body: pattern_defect(body) is not None
    ),
)
ANY_BODY = st.text(st.sampled_from(list(PATTERN_CHARS + " |()\t\x01,")), max_size=10)


def admitted(allowed_tools: str, command: str) -> bool:
    """Whether a skill with this ``allowed-tools`` text admits ``command`` for ``bash``."""
    try:
        specs = parse_allowed_tools(allowed_tools)
    except ValueError:
        return False  # the skill is refused: nothing runs
    policy = SkillPolicy("s", specs)
    return policy.allows_tool("bash") and policy.bash_reason(command) is None


def command_of(words: list[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


@pytest.mark.parametrize("text", ["Bash()", "Bash( )", "Bash(\t)", "bash(|)", "exec(:*)"])
def test_an_empty_or_unclassifiable_pattern_is_not_a_plain_bash(text: str) -> None:
    assert not admitted(f"Bash(echo:*) {text}", "touch ran")
    assert not admitted(text, "touch ran")
    assert admitted(f"Bash(echo:*) {text}", "echo hi")
    (spec,) = parse_allowed_tools(text) or ()
    assert spec.defect is not None
    policy = SkillPolicy("s", parse_allowed_tools(f"Bash(echo:*) {text}"))
    assert f"{text} admits nothing" in (policy.bash_reason("touch ran") or "")


def test_an_empty_constraint_of_another_tool_allows_nothing() -> None:
    policy = SkillPolicy("s", parse_allowed_tools("Read() Grep( )"))
    assert not policy.allows_tool("read")
    assert not policy.allows_tool("grep")


@settings(max_examples=400, deadline=None, database=None)
@given(body=ANY_BODY, words=COMMAND_WORDS)
def test_an_unclassifiable_pattern_admits_no_command(body: str, words: list[str]) -> None:
    if pattern_defect(body) is None:
        return
    assert not words_match(body, words)
    assert not admitted(f"Bash({body})", command_of(words))


@settings(max_examples=400, deadline=None, database=None)
@given(
    bodies=st.lists(BODY, max_size=3),
    malformed=MALFORMED,
    position=st.integers(min_value=0, max_value=3),
    commands=st.lists(COMMAND_WORDS, min_size=1, max_size=5),
)
def test_adding_a_malformed_pattern_never_admits_more(
    bodies: list[str], malformed: str, position: int, commands: list[list[str]]
) -> None:
    assert pattern_defect(malformed) is not None
    before = " ".join(f"Bash({body})" for body in bodies)
    entries = [f"Bash({body})" for body in bodies]
    entries.insert(min(position, len(entries)), f"Bash({malformed})")
    after = " ".join(entries)
    for words in commands:
        command = command_of(words)
        if admitted(after, command):
            assert bodies, f"{after!r} admits {command!r}"
            assert admitted(before, command), f"{after!r} admits {command!r}, {before!r} not"


def _class_regex(body: str, negated: bool) -> str:
    items: list[str] = []
    position = 0
    while position < len(body):
        if position + 2 < len(body) and body[position + 1] == "-":
            low, high = body[position], body[position + 2]
            if low <= high:
                items.append(f"{re.escape(low)}-{re.escape(high)}")
            position += 3
        else:
            items.append(re.escape(body[position]))
            position += 1
    if negated:
        return "[^\\x00" + "".join(items) + "]"
    return "[" + "".join(items) + "]" if items else "(?!)"


def _word_regex(pattern: str) -> str:
    """An independent translation of one pattern word into a regular expression."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            out.append("[^\\x00]*")
        elif char == "?":
            out.append("[^\\x00]")
        elif char == "[":
            start = index + 1
            negated = start < len(pattern) and pattern[start] in "!^"
            body_start = start + 1 if negated else start
            search = body_start + 1 if pattern[body_start : body_start + 1] == "]" else body_start
            close = pattern.find("]", search)
            if close < 0:
                out.append(re.escape(char))
            else:
                out.append(_class_regex(pattern[body_start:close], negated))
                index = close
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def reference_match(body: str, words: list[str]) -> bool:
    for raw in body.split("|"):
        alternative = raw.strip()
        if alternative.endswith(":*"):
            prefix = alternative[:-2].split()
            if words[: len(prefix)] == prefix:
                return True
            continue
        parts = [
            "[^\\x00]*(?:\\x00[^\\x00]*)*" if word == "*" else _word_regex(word)
            for word in alternative.split()
        ]
        if re.fullmatch("\\x00".join(parts), "\x00".join(words)):
            return True
    return False


@settings(max_examples=1000, deadline=None, database=None)
@given(body=BODY, words=COMMAND_WORDS)
def test_words_match_agrees_with_a_regular_expression_matcher(body: str, words: list[str]) -> None:
    if pattern_defect(body) is not None:
        assert not words_match(body, words)
        return
    assert words_match(body, words) == reference_match(body, words)


def test_a_skill_with_an_empty_pattern_does_not_run_other_commands(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "echoer"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: echoer\ndescription: Echoes.\n"
        "allowed-tools: Bash(echo:*) Bash()\n---\n\nEcho.\n"
    )
    with LocalSkillRuntime(work_root=tmp_path / "work") as runtime:
        tools = SkillTools(runtime, [skill])
        with tools.turn() as turn:
            turn.dispatch("skill", {"command": "echoer"})
            refused = turn.dispatch("bash", {"command": "touch ran"})
            assert refused.startswith("Error: SKILL_TOOL_NOT_ALLOWED")
            assert "Bash() admits nothing: the pattern is empty" in refused
            assert turn.dispatch("bash", {"command": "echo hi"}) == "hi"
        marker = f"{runtime.default_working_directory}/ran"
        assert not runtime.get_file_system().exists(marker)
