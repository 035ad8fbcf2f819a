"""Rule 3: resource resolution in tool arguments (unique, ambiguous, not found, workspace:,
escapes, inactive skills, output paths, JSON Pointer inputs)."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_turn.helpers import MakeSkill
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.resources import (
    ActiveResources,
    ResourceError,
    ResourceResolver,
    expand_pointer,
    unsafe_relative_path,
)
from skillruntime.local import LocalSkillRuntime

AUDIT = {"scripts/audit.py": "print('audited')\n", "references/guide.md": "# Audit guide\n"}
STATS = {"scripts/run.sh": "echo stats\n", "references/guide.md": "# Stats guide\n"}


@pytest.fixture
def tools(runtime: LocalSkillRuntime, make_skill: MakeSkill) -> SkillTools:
    return SkillTools(
        runtime,
        [make_skill("audit", AUDIT), make_skill("stats", STATS), make_skill("idle", STATS)],
    )


def _workspace(runtime: LocalSkillRuntime, name: str, text: str) -> None:
    runtime.get_file_system().write_text(f"{runtime.default_working_directory}/{name}", text)


def test_a_unique_skill_path_is_rewritten_to_the_prepared_copy(tools: SkillTools) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        result = turn.call(("bash", {"command": "python3 scripts/audit.py"}))
        assert "audited" in result.content
        prepared = tools.prepared_skill("audit")
        assert prepared is not None
        assert result.usage.resolved_args is not None
        assert result.usage.resolved_args["command"] == (
            f"python3 {prepared.base_path}/scripts/audit.py"
        )
        assert result.usage.skill_uris == (turn.skill_uri("audit"),)
        guide = turn.call(("read", {"file_path": "references/guide.md"}))
        assert "Audit guide" in guide.content


def test_a_path_of_several_active_skills_is_ambiguous(tools: SkillTools) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        turn.dispatch("skill", {"command": "stats"})
        result = turn.call(("read", {"file_path": "references/guide.md"}))
        assert result.code == "SKILL_RESOURCE_AMBIGUOUS"
        assert "audit" in result.content and "stats" in result.content  # noqa: PT018


def test_an_unknown_path_fails_closed_and_the_tool_does_not_run(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        result = turn.call(("bash", {"command": "python3 scripts/missing.py; touch ran"}))
        assert result.code == "SKILL_RESOURCE_NOT_FOUND"
        assert not runtime.get_file_system().exists(f"{runtime.default_working_directory}/ran")


def test_an_inactive_skill_file_is_not_found(tools: SkillTools) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        assert turn.call(("bash", {"command": "sh scripts/run.sh"})).code == (
            "SKILL_RESOURCE_NOT_FOUND"
        )


def test_workspace_files_and_the_workspace_prefix(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    _workspace(runtime, "data.csv", "a,b\n")
    _workspace(runtime, "references/guide.md", "# My own guide\n")
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        assert "a,b" in turn.dispatch("read", {"file_path": "data.csv"})
        # The skill's file wins for a bare path; workspace: names the workspace file.
        assert "Audit guide" in turn.dispatch("read", {"file_path": "references/guide.md"})
        own = turn.call(("read", {"file_path": "workspace:references/guide.md"}))
        assert "My own guide" in own.content
        assert own.usage.skill_uris == ()
        assert "My own guide" in turn.dispatch(
            "bash", {"command": "cat workspace:references/guide.md"}
        )
        assert turn.call(("read", {"file_path": "workspace:../x"})).code == (
            "SKILL_RESOURCE_NOT_FOUND"
        )


def test_output_paths_are_never_rewritten(tools: SkillTools, runtime: LocalSkillRuntime) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        turn.dispatch("write", {"file_path": "scripts/audit.py", "content": "print('mine')\n"})
        turn.dispatch("bash", {"command": "python3 scripts/audit.py > report.txt"})
        assert "audited" in turn.dispatch("read", {"file_path": "workspace:report.txt"})
        assert "mine" in turn.dispatch("read", {"file_path": "workspace:scripts/audit.py"})


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "scripts/../../secret.txt",
        "%2e%2e/secret.txt",
        "scripts%2f..%2fx.py",
        "scripts\\..\\x.py",
        "~/secret.txt",
        "scripts/\x00x.py",
    ],
)
def test_escapes_are_refused(tools: SkillTools, path: str) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        assert turn.call(("read", {"file_path": path})).code == "SKILL_RESOURCE_NOT_FOUND"


def test_without_an_active_skill_nothing_is_resolved(tools: SkillTools) -> None:
    with tools.turn() as turn:
        result = turn.call(("bash", {"command": "cat ../nothing/here.txt"}))
        assert result.code is None
        assert result.usage.resolved_args == {
            "command": "cat ../nothing/here.txt",
            "timeout_seconds": None,
            "working_directory": None,
        }


# ------------------------------------------------------------------ properties

_segment = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=8
)
_relative = st.lists(st.one_of(_segment, st.sampled_from(["..", ".", "%2e%2e", "%2F"])), max_size=6)

SKILL = ActiveResources("s", "/skills/s", "/runtime/skills/s", frozenset({"a/b.py", "c.md"}))


@settings(max_examples=300, deadline=None)
@given(_relative)
def test_resolved_paths_never_leave_the_skill_or_the_workspace(parts: list[str]) -> None:
    path = "/".join(parts)
    resolver = ResourceResolver([SKILL], lambda candidate: True)
    codes: list[str] = []
    for value in (path, f"workspace:{path}"):
        try:
            resolved = resolver.resolve(value)
        except ResourceError as error:
            codes.append(error.code)
            continue
        if resolved.startswith("/"):
            assert posixpath.normpath(resolved).startswith(SKILL.base_path + "/")
        else:
            assert ".." not in resolved.split("/")
            assert "%2e" not in resolved.lower() and "%2f" not in resolved.lower()  # noqa: PT018
            assert "\\" not in resolved
    assert set(codes) <= {"SKILL_RESOURCE_NOT_FOUND"}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_unsafe_relative_path_refuses_every_dot_dot_segment(text: str) -> None:
    if ".." in text.split("/") or text.startswith("/") or "%2e" in text.lower():
        assert unsafe_relative_path(text) is not None


def test_json_pointers_with_wildcards() -> None:
    document = {
        "path": "c.md",
        "files": [{"workspace_path": "a/b.py"}, {"workspace_path": "workspace:x"}],
        "pages": {"one": {"body_workspace_path": "c.md"}},
        "out": "c.md",
    }
    assert [value for _, value in expand_pointer(document, "/files/*/workspace_path")] == [
        "a/b.py",
        "workspace:x",
    ]
    resolver = ResourceResolver([SKILL], lambda candidate: False)
    resolved = resolver.resolve_arguments(
        document,
        {
            "/path": "local_file",
            "/files/*/workspace_path": "local_file",
            "/pages/*/body_workspace_path": "local_file",
        },
    )
    assert resolved["path"] == "/runtime/skills/s/c.md"
    assert resolved["files"] == [
        {"workspace_path": "/runtime/skills/s/a/b.py"},
        {"workspace_path": "x"},
    ]
    assert resolved["pages"]["one"]["body_workspace_path"] == "/runtime/skills/s/c.md"
    assert resolved["out"] == "c.md"  # not declared: an output, untouched
    assert document["path"] == "c.md"  # the input is not modified
    assert expand_pointer(document, "/missing/*") == []
    assert expand_pointer(document, "/files/1/workspace_path") == [
        (("files", 1, "workspace_path"), "workspace:x")
    ]
    with pytest.raises(ValueError, match="starts with '/'"):
        expand_pointer(document, "path")


def test_directory_inputs_match_skill_directories() -> None:
    resolver = ResourceResolver([SKILL], lambda candidate: False)
    assert resolver.resolve("a", "local_directory") == "/runtime/skills/s/a"
    with pytest.raises(ResourceError):
        resolver.resolve("a", "local_file")
