"""Skill policy: allowed-tools intersection, Bash patterns, compound refusal, requires checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.models import Skill, SkillRuntimeConfig
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.skills import validate_skill_directory
from skillruntime.core.tools import SkillTools, ToolSpec, parse_allowed_tools
from skillruntime.core.tools.policy import (
    Requirements,
    SkillPolicy,
    command_matches,
    compound_command_reason,
)


def names(tools: SkillTools) -> list[str]:
    return [tool.name for tool in tools.tools]


# ------------------------------------------------------------------ parsing


def test_allowed_tools_string_is_split_outside_parentheses() -> None:
    assert parse_allowed_tools("Bash(git:*) Bash(python *), Read") == (
        ToolSpec("bash", "git:*", "Bash(git:*)"),
        ToolSpec("bash", "python *", "Bash(python *)"),
        ToolSpec("read", None, "Read"),
    )


def test_allowed_tools_list_and_aliases() -> None:
    specs = parse_allowed_tools(["exec", "read_file", "LS", "WebFetch", "Write Edit"])
    assert specs is not None
    assert [spec.tool for spec in specs] == ["bash", "read", "ls", "webfetch", "write", "edit"]


def test_undeclared_allowed_tools_is_none_and_unbalanced_is_refused() -> None:
    assert parse_allowed_tools(None) is None
    assert parse_allowed_tools([]) == ()
    with pytest.raises(ValueError, match="unbalanced"):
        parse_allowed_tools("Bash(git:*")
    with pytest.raises(ValueError, match="unbalanced"):
        parse_allowed_tools("Bash)")


# ----------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("git:*", "git status", True),
        ("git:*", "git", True),
        ("git:*", "gitk", False),
        ("git:*", "  git log -1 ", True),
        ("python *", "python scripts/x.py --flag", True),
        ("python *", "python3 scripts/x.py", False),
        ("python *", "python", False),
        ("python3 scripts/*.py *", "python3 scripts/report.py a.csv out", True),
        ("git:*|python *", "python x.py", True),
        ("git:*|python *", "ls", False),
    ],
)
def test_command_matches(pattern: str, command: str, expected: bool) -> None:
    assert command_matches(pattern, command) is expected


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf /",
        "git status && rm x",
        "git status || rm x",
        "git log | sh",
        "git log > out",
        "git apply < patch",
        "git log >> out",
        "git status & rm x",
        "git status\nrm x",
        "git status\rrm x",
        "git log `rm x`",
        "git log $(rm x)",
        'git log "$(rm x)"',
        "git log 'unbalanced",
        "echo $HOME",
    ],
)
def test_compound_commands_are_refused(command: str) -> None:
    assert compound_command_reason(command) is not None


@pytest.mark.parametrize(
    "command", ["git status", "python x.py 'a;b'", 'git commit -m "a | b"', "echo '$HOME'"]
)
def test_simple_commands_pass(command: str) -> None:
    assert compound_command_reason(command) is None


def test_patterns_in_one_skill_are_alternatives_and_skills_must_all_agree(
    make_skill: Any,
) -> None:
    both = SkillPolicy.from_skill(make_skill("a", allowed_tools="Bash(git:*) Bash(python *)"))
    assert both.bash_reason("git status") is None
    assert both.bash_reason("python x.py") is None
    assert both.bash_reason("ls") is not None
    assert both.bash_reason("git status; ls") is not None
    plain = SkillPolicy.from_skill(make_skill("b", allowed_tools="Bash Bash(git:*)"))
    assert plain.bash_reason("anything | goes") is None


# ------------------------------------------------------- tool set behaviour


def test_unrestricted_skill_keeps_every_tool(runtime: SkillRuntime, make_skill: Any) -> None:
    tools = SkillTools(runtime, [make_skill("free")])
    tools.dispatch("skill", {"command": "free"})
    assert names(tools) == ["skill", "bash", "read", "write", "edit", "ls", "glob", "grep"]


def test_disallowed_tools_disappear_after_activation_and_are_refused(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    tools = SkillTools(runtime, [make_skill("ro", allowed_tools="Read Grep Glob")])
    assert len(tools.tools) == 8
    assert tools.dispatch("skill", {"command": "ro"}).startswith("Runtime:")
    assert names(tools) == ["skill", "read", "glob", "grep"]
    assert [item["name"] for item in tools.anthropic_tools()] == names(tools)
    target = runtime.default_working_directory + "/x.txt"
    refused = tools.dispatch("write", {"file_path": target, "content": "x"})
    assert refused == "Error: tool 'write' is not allowed by the active skill 'ro'"
    assert not runtime.get_file_system().exists(target)
    assert tools.dispatch("bash", {"command": "true"}).startswith("Error: tool 'bash' is not")
    tools.reset_activations()
    assert len(tools.tools) == 8


def test_effective_tools_are_the_intersection_of_active_skills(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    tools = SkillTools(
        runtime,
        [
            make_skill("a", allowed_tools=["Read", "Write", "Bash(python3 *)"]),
            make_skill("b", allowed_tools="read edit bash(git:*)"),
            make_skill("c"),
        ],
    )
    tools.dispatch("skill", {"command": "a"})
    assert names(tools) == ["skill", "bash", "read", "write"]
    tools.dispatch("skill", {"command": "c"})
    assert names(tools) == ["skill", "bash", "read", "write"]
    tools.dispatch("skill", {"command": "b"})
    assert names(tools) == ["skill", "bash", "read"]
    assert tools.active_skills == ["a", "c", "b"]
    # bash is visible, but no command satisfies both python3 * and git:*.
    refused = tools.dispatch("bash", {"command": "python3 -c pass"})
    assert refused.startswith("Error: skill 'b' allows only commands matching bash(git:*)")
    refused = tools.dispatch("bash", {"command": "git --version"})
    assert refused.startswith("Error: skill 'a' allows only commands matching Bash(python3 *)")


def test_constrained_bash_runs_matching_commands_and_refuses_compound_ones(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    tools = SkillTools(runtime, [make_skill("py", allowed_tools="Bash(echo *) Bash(printf:*)")])
    tools.dispatch("skill", {"command": "py"})
    assert tools.dispatch("bash", {"command": "echo allowed"}) == "allowed"
    marker = runtime.default_working_directory + "/pwned"
    refused = tools.dispatch("bash", {"command": f"echo hi > {marker}"})
    assert "refused because it contains the control operator '>'" in refused
    refused = tools.dispatch("bash", {"command": "echo $(id)"})
    assert "command substitution" in refused
    assert tools.dispatch("bash", {"command": "ls"}).startswith(
        "Error: skill 'py' allows only commands matching Bash(echo *), Bash(printf:*)"
    )
    assert not runtime.get_file_system().exists(marker)


def test_constrained_non_bash_entry_allows_nothing(runtime: SkillRuntime, make_skill: Any) -> None:
    tools = SkillTools(runtime, [make_skill("c", allowed_tools="Read(/data/**) Grep")])
    tools.dispatch("skill", {"command": "c"})
    assert names(tools) == ["skill", "grep"]


def test_always_allowed_tools_survive_restrictions(runtime: SkillRuntime, make_skill: Any) -> None:
    tools = SkillTools(
        runtime, [make_skill("r", allowed_tools="Read")], always_allowed=("skill", "ls")
    )
    tools.dispatch("skill", {"command": "r"})
    assert names(tools) == ["skill", "read", "ls"]


# --------------------------------------------------------------- requires


def test_requirements_parsing() -> None:
    assert Requirements.from_metadata({"requires": {"bins": "git", "env": ["A_B"]}}) == (
        Requirements(bins=("git",), env=("A_B",))
    )
    assert Requirements.from_metadata({"vikingbot": {"requires": {"bins": ["jq"]}}}).bins == ("jq",)
    with pytest.raises(ValueError, match="not a valid variable name"):
        Requirements.from_metadata({"requires": {"env": ["BAD-NAME"]}})
    with pytest.raises(ValueError, match="not a command name"):
        Requirements.from_metadata({"requires": {"bins": ["/usr/bin/git"]}})


def test_missing_bin_blocks_activation_and_is_named(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    skill = make_skill("needs", metadata={"requires": {"bins": ["sh", "surely-missing-tool-4711"]}})
    tools = SkillTools(wrapped, [skill], configs={})
    result = tools.dispatch("skill", {"command": "needs"})
    assert result == (
        f"Error: skill 'needs' cannot be used: missing in the {runtime.name} runtime: "
        "bin surely-missing-tool-4711"
    )
    assert tools.active_skills == []
    checks = [r for r in wrapped.executed if "command -v" in r.command]
    assert len(checks) == 1
    tools.dispatch("skill", {"command": "needs"})
    assert len([r for r in wrapped.executed if "command -v" in r.command]) == 2


def test_missing_env_is_named_and_present_env_value_is_never_shown(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    skill = make_skill(
        "envy",
        metadata={"requires": {"env": ["SR_TOOLS_PRESENT_TOKEN", "SR_TOOLS_ABSENT_TOKEN"]}},
    )
    secret = "s3cr3t-value-never-shown"
    config = SkillRuntimeConfig(environment={"SR_TOOLS_PRESENT_TOKEN": secret})
    tools = SkillTools(wrapped, [skill], configs={"envy": config})
    result = tools.dispatch("skill", {"command": "envy"})
    assert result == (
        f"Error: skill 'envy' cannot be used: missing in the {runtime.name} runtime: "
        "env SR_TOOLS_ABSENT_TOKEN"
    )
    check = next(r for r in wrapped.executed if "SR_TOOLS_ABSENT_TOKEN" in r.command)
    assert secret not in check.command
    assert secret not in repr(check)


def test_requirements_are_checked_once_when_met(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    skill: Skill = make_skill(
        "ok", metadata={"requires": {"bins": ["sh"], "env": ["SR_TOOLS_SET"]}}
    )
    config = SkillRuntimeConfig(environment={"SR_TOOLS_SET": ""})
    tools = SkillTools(wrapped, [skill], configs={"ok": config})
    assert tools.dispatch("skill", {"command": "ok"}).startswith(f"Runtime: {runtime.name}")
    assert tools.dispatch("skill", {"command": "ok"}).startswith(f"Runtime: {runtime.name}")
    assert len([r for r in wrapped.executed if "command -v" in r.command]) == 1


# ------------------------------------------------- one allowed-tools splitter

ENTRY = st.sampled_from(["Bash", "Read", "Bash(git:*)", "Bash(python *)", "Grep", "Write(a, b)"])
SEPARATOR = st.sampled_from([" ", ",", ", ", " ,", "\t", "\n", " , "])


def test_skill_allowed_tools_splits_commas_like_the_policy() -> None:
    skill = Skill(name="s", base_path="/s", frontmatter={"allowed-tools": "Bash, Read"})
    assert skill.allowed_tools == ("Bash", "Read")
    listed = Skill(name="s", base_path="/s", frontmatter={"allowed-tools": ["Bash, Read", "Ls"]})
    assert listed.allowed_tools == ("Bash", "Read", "Ls")
    assert Skill(name="s", base_path="/s").allowed_tools is None


@settings(max_examples=300, deadline=None, database=None)
@given(entries=st.lists(ENTRY, max_size=6), separators=st.lists(SEPARATOR, min_size=6))
def test_skill_allowed_tools_and_policy_read_the_same_entries(
    entries: list[str], separators: list[str]
) -> None:
    text = "".join(entry + separators[index] for index, entry in enumerate(entries))
    skill = Skill(name="s", base_path="/s", frontmatter={"allowed-tools": text})
    specs = parse_allowed_tools(text)
    assert specs is not None
    assert skill.allowed_tools == tuple(entries)
    assert tuple(spec.raw for spec in specs) == tuple(entries)


def test_unbalanced_allowed_tools_is_reported_by_validation_and_the_property(
    tmp_path: Path,
) -> None:
    (tmp_path / "SKILL.md").write_text(
        "---\nname: s\ndescription: d\nallowed-tools: Bash(git:* Read\n---\nbody\n"
    )
    problems = validate_skill_directory(tmp_path)
    assert any("unbalanced '('" in problem.message for problem in problems)
    skill = Skill(name="s", base_path="/s", frontmatter={"allowed-tools": "Bash(git:* Read"})
    with pytest.raises(ValueError, match="unbalanced"):
        _ = skill.allowed_tools


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("git:*", "'git' status", True),
        ("git:*", "'git status'", False),
        ("git log:*", "git log -1", True),
        ("git log:*", "git 'log -1'", False),
        ("git * main", "git push origin main", True),
        ("git * main", "git main", False),
        ("python *", "python 'a b'", True),
        ("python *.py", "python x.py", True),
        ("python *.py", "python x.py y", False),
        ("git:*", "git status#;touch pwned", False),
        ("git:*", "git $'\\x3b' ls", False),
    ],
)
def test_patterns_match_the_words_bash_will_pass(
    pattern: str, command: str, expected: bool
) -> None:
    assert command_matches(pattern, command) is expected
