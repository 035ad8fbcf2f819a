"""Bash word rewriting touches only the words it resolves, never inline code.

``cat data/a.txt; sh -c 'echo data/a.txt'`` used to have the quoted copy rewritten too (the
rewrite replaced every occurrence of the text). Words now come from the bash grammar with their
positions and are replaced where they stand.
"""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_turn.helpers import MakeSkill
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.resources import ActiveResources, ResourceResolver
from skillruntime.core.tools.simple_command import command_word_spans
from skillruntime.local import LocalSkillRuntime

SKILL = ActiveResources(
    "s", "/skills/s", "/runtime/skills/s dir", frozenset({"data/a.txt", "scripts/run.py"})
)
BASE = shlex.quote("/runtime/skills/s dir")[:-1]  # the quoted base, without its closing quote


def resolver() -> ResourceResolver:
    return ResourceResolver([SKILL], lambda path: path == "out/kept.txt")


def test_inline_code_keeps_its_copy_of_a_resolved_path() -> None:
    assert resolver().resolve_command("cat data/a.txt; sh -c 'echo data/a.txt'") == (
        f"cat {BASE}/data/a.txt'; sh -c 'echo data/a.txt'"
    )
    assert resolver().resolve_command("cat data/a.txt && python3 -c \"print('data/a.txt')\"") == (
        f"cat {BASE}/data/a.txt' && python3 -c \"print('data/a.txt')\""
    )


def test_substitutions_and_other_words_are_left_alone() -> None:
    command = 'cat data/a.txt "$(cat data/a.txt)" x=data/a.txt --file=data/a.txt > data/a.txt'
    assert resolver().resolve_command(command) == (
        f'cat {BASE}/data/a.txt\' "$(cat data/a.txt)" x=data/a.txt --file=data/a.txt > data/a.txt'
    )


def test_quoted_words_are_rewritten_as_whole_words() -> None:
    assert resolver().resolve_command("python3 'scripts/run.py' \"data/a.txt\"") == (
        f"python3 {BASE}/scripts/run.py' {BASE}/data/a.txt'"
    )
    assert resolver().resolve_command("cat out/kept.txt") == "cat out/kept.txt"


CODE_PIECE = st.sampled_from(["data/a.txt", " ", "echo", ";", "|", "x", "scripts/run.py", "\n"])


@settings(max_examples=300, deadline=None, database=None)
@given(
    code=st.lists(CODE_PIECE, max_size=8).map("".join),
    interpreter=st.sampled_from(["sh", "bash", "python3", "node"]),
    option=st.sampled_from(["-c", "-e", "--command"]),
    separator=st.sampled_from(["; ", " && ", " | ", "\n"]),
    first=st.booleans(),
)
def test_inline_code_is_never_rewritten(
    code: str, interpreter: str, option: str, separator: str, first: bool
) -> None:
    inline = f"{interpreter} {option} {shlex.quote(code)}"
    parts = [inline, "cat data/a.txt"] if first else ["cat data/a.txt", inline]
    rewritten = resolver().resolve_command(separator.join(parts))
    assert shlex.quote(code) in rewritten
    spans = command_word_spans(rewritten)
    assert spans is not None
    values = [[word.value for word in words] for words in spans]
    assert ["cat", "/runtime/skills/s dir/data/a.txt"] in values
    assert [interpreter, option, code] in values


def test_a_turn_leaves_inline_code_alone(runtime: LocalSkillRuntime, make_skill: MakeSkill) -> None:
    tools = SkillTools(runtime, [make_skill("data", {"data/a.txt": "from the skill\n"})])
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "data"})
        result = turn.call(("bash", {"command": "cat data/a.txt; sh -c 'echo data/a.txt'"}))
        assert result.content == "from the skill\ndata/a.txt"
        resolved = result.usage.resolved_args
        assert resolved is not None
        assert resolved["command"].endswith("; sh -c 'echo data/a.txt'")


def test_long_and_deeply_nested_commands_are_rewritten_without_recursion() -> None:
    nested = "if true; then " * 3000 + "cat data/a.txt" + "; fi" * 3000
    chain = " && ".join(["cat data/a.txt"] * 3000)
    assert resolver().resolve_command(nested).count(f"{BASE}/data/a.txt'") == 1
    assert resolver().resolve_command(chain).count(f"{BASE}/data/a.txt'") == 3000


def test_a_turn_answers_a_deeply_nested_command(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    tools = SkillTools(runtime, [make_skill("data", {"data/a.txt": "from the skill\n"})])
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "data"})
        nested = "if true; then " * 2000 + "cat data/a.txt" + "; fi" * 2000
        assert turn.dispatch("bash", {"command": nested}) == "from the skill"
