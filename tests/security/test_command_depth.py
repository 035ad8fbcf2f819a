"""The bash policy checker on long and deeply nested input: it refuses or classifies, never raises.

Long ``&&``/``||`` chains and thousands of nested ``if``/subshells/substitutions used to walk the
syntax tree recursively and raise :class:`RecursionError` (which a turn then raised too, though
``turn.dispatch`` never raises). The walk is iterative, and input longer than
:data:`MAX_COMMAND_CHARS` is refused unparsed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.simple_command import (
    MAX_COMMAND_CHARS,
    UnclassifiedCommandError,
    simple_command_words,
)
from skillruntime.local import LocalSkillRuntime

WRAPPERS = {
    "and": ("true && ", ""),
    "or": ("false || ", ""),
    "pipe": ("true | ", ""),
    "if": ("if true; then ", "; fi"),
    "while": ("while false; do ", "; done"),
    "subshell": ("(", ")"),
    "group": ("{ ", "; }"),
    "substitution": ("echo $(", ")"),
    "quoted_substitution": ('echo "$(', ')"'),
    "not": ("! ", ""),
    "function": ("f() { ", "; }"),
    "arithmetic": ("((", "))"),
    "backslash": ("\\", ""),
    "quote": ("'", ""),
}
INNER = st.sampled_from(["true", "echo hi", "git status", "touch ran", "", "'", '"', "$(", ")"])


def deep(layers: list[tuple[str, int]], inner: str) -> str:
    prefix: list[str] = []
    suffix: list[str] = []
    for name, count in layers:
        opening, closing = WRAPPERS[name]
        prefix.append(opening * count)
        suffix.insert(0, closing * count)
    return "".join(prefix) + inner + "".join(suffix)


def classify(command: str) -> tuple[str, ...] | str:
    """The words, or the refusal reason; any other exception fails the test."""
    try:
        words = simple_command_words(command)
    except UnclassifiedCommandError as exc:
        reason = exc.reason
        assert reason
        return reason
    assert all(isinstance(word, str) for word in words)
    return words


@pytest.mark.parametrize(
    "command",
    [
        " && ".join(["true"] * 1000),
        " || ".join(["true"] * 5000),
        " | ".join(["true"] * 5000),
        "if true; then " * 2000 + "true" + "; fi" * 2000,
        "(" * 20_000 + "true" + ")" * 20_000,
        "echo $(" * 10_000 + "true" + ")" * 10_000,
    ],
    ids=["and-1000", "or-5000", "pipe-5000", "if-2000", "subshell-20000", "substitution-10000"],
)
def test_long_chains_and_deep_nesting_are_refused(command: str) -> None:
    assert isinstance(classify(command), str)


def test_over_long_input_is_refused_unparsed() -> None:
    assert classify("echo " + "a" * MAX_COMMAND_CHARS) == (
        f"it is longer than {MAX_COMMAND_CHARS} characters"
    )
    assert classify("echo " + "a" * (MAX_COMMAND_CHARS - 5)) == (
        "echo",
        "a" * (MAX_COMMAND_CHARS - 5),
    )


@settings(max_examples=150, deadline=None, database=None)
@given(
    layers=st.lists(
        st.tuples(st.sampled_from(sorted(WRAPPERS)), st.integers(min_value=1, max_value=3000)),
        min_size=1,
        max_size=3,
    ),
    inner=INNER,
)
def test_deep_generated_input_is_classified_or_refused(
    layers: list[tuple[str, int]], inner: str
) -> None:
    command = deep(layers, inner)
    result = classify(command)
    if not {name for name, _ in layers} & {"backslash", "quote"}:
        # Nothing quotes the wrappers: each adds shell structure, so the command is refused.
        assert isinstance(result, str)


def test_a_turn_refuses_a_deep_command_instead_of_raising(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "echoer"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: echoer\ndescription: Echoes.\nallowed-tools: Bash(echo:*)\n---\n\nEcho.\n"
    )
    with LocalSkillRuntime(work_root=tmp_path / "work") as runtime:
        tools = SkillTools(runtime, [skill])
        with tools.turn() as turn:
            turn.dispatch("skill", {"command": "echoer"})
            for command in (
                " && ".join(["true"] * 1000),
                "if true; then " * 2000 + "true" + "; fi" * 2000,
            ):
                result = turn.dispatch("bash", {"command": command})
                assert result.startswith("Error: SKILL_TOOL_NOT_ALLOWED"), result[:200]
        tools.dispatch("skill", {"command": "echoer"})
        refused = tools.dispatch("bash", {"command": " || ".join(["true"] * 1000)})
        assert refused.startswith("Error:")
