"""Rule 4: remote first — activation reads SKILL.md and the manifest only; the package is
materialized on the first tool call that needs a local file; text reads come from the server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.viking import VikingDouble
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/audit"
PLAIN = "viking://user/default/skills/plain"
AUDIT_MD = b"""---
name: audit
description: Audits a release.
---

Run `sh scripts/audit.sh`; read references/guide.md first.
"""
PLAIN_MD = b"---\nname: plain\ndescription: Instructions only.\n---\n\nJust answer politely.\n"


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(
            ROOT,
            {
                "SKILL.md": AUDIT_MD,
                "scripts/audit.sh": b"echo audited\n",
                "references/guide.md": b"line one\nline two\nline three\n",
            },
        )
        double.add_skill(PLAIN, {"SKILL.md": PLAIN_MD, "assets/big.bin": b"\x00" * 4096})
        yield double


@pytest.fixture
def setup(
    viking: VikingDouble, tmp_path: Path, runtime: LocalSkillRuntime
) -> Iterator[tuple[SkillTools, VikingSkillStore]]:
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        SkillTools(runtime, viking_skill_sources(store, [ROOT, PLAIN])) as tools,
    ):
        yield tools, store


def test_an_instruction_only_skill_downloads_nothing_and_prepares_nothing(
    setup: tuple[SkillTools, VikingSkillStore], viking: VikingDouble
) -> None:
    tools, store = setup
    with tools.turn() as turn:
        result = turn.call(("skill", {"command": "plain"}))
        assert "Just answer politely." in result.content
        assert f"Skill location: {PLAIN}" in result.content
        assert "hi" in turn.dispatch("bash", {"command": "echo hi"})
        assert turn.base_directory("plain") is None
    assert sum(viking.downloads.values()) == 0
    assert tools.prepared_skill("plain") is None
    assert store.cache_entries() == []


def test_text_reads_are_served_from_the_server(
    setup: tuple[SkillTools, VikingSkillStore], viking: VikingDouble
) -> None:
    tools, store = setup
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        guide = turn.call(("read", {"file_path": "references/guide.md", "offset": 2, "limit": 1}))
        assert guide.content.startswith(f"File: {ROOT}/references/guide.md\n")
        assert "     2\tline two\n" in guide.content
        assert "line one" not in guide.content
        assert guide.usage.skill_uris == (ROOT,)
        by_uri = turn.call(("read", {"file_path": f"{ROOT}/SKILL.md"}))
        assert "Run `sh scripts/audit.sh`" in by_uri.content
        missing = turn.call(("read", {"file_path": "references/absent.md"}))
        assert missing.code == "SKILL_RESOURCE_NOT_FOUND"
    assert dict(viking.downloads) == {f"{ROOT}/references/guide.md": 1}
    assert store.cache_entries() == []


def test_the_first_script_run_materializes_the_package_once(
    setup: tuple[SkillTools, VikingSkillStore],
    viking: VikingDouble,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools, store = setup
    caplog.set_level(logging.INFO)
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        turn.dispatch("read", {"file_path": "references/guide.md"})
        assert sum(viking.downloads.values()) == 1  # the remote read only
        assert "audited" in turn.dispatch("bash", {"command": "sh scripts/audit.sh"})
        assert "audited" in turn.dispatch("bash", {"command": "sh scripts/audit.sh"})
        # Once materialized, reads use the local copy.
        assert "line one" in turn.dispatch("read", {"file_path": "references/guide.md"})
        assert [entry.leased for entry in store.cache_entries()] == [True]
    assert viking.downloads[f"{ROOT}/scripts/audit.sh"] == 1
    assert viking.downloads[f"{ROOT}/references/guide.md"] == 2  # one remote read, one package
    events = [getattr(record, "skill_event", None) for record in caplog.records]
    assert events.index("remote_read") < events.index("materialized")
    assert events.count("materialized") == 1
    assert "cache" in events
    assert [entry.leased for entry in store.cache_entries()] == [False]


def test_outside_a_turn_remote_skills_load_in_full_as_before(
    setup: tuple[SkillTools, VikingSkillStore], viking: VikingDouble
) -> None:
    tools, _ = setup
    result = tools.dispatch("skill", {"command": "plain"})
    assert "Base directory for this skill:" in result
    assert viking.downloads[f"{PLAIN}/assets/big.bin"] == 1


def test_workspace_reads_still_work_while_a_remote_skill_is_pending(
    setup: tuple[SkillTools, VikingSkillStore], runtime: LocalSkillRuntime
) -> None:
    tools, _ = setup
    files = runtime.get_file_system()
    files.write_text(f"{runtime.default_working_directory}/data.csv", "a,b\n")
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "audit"})
        assert "a,b" in turn.dispatch("read", {"file_path": "data.csv"})
        assert turn.call(("read", {"file_path": "nothing.csv"})).code == (
            "SKILL_RESOURCE_NOT_FOUND"
        )
        assert turn.base_directory("audit") is None


def test_long_lines_of_a_remote_read_are_cut() -> None:
    from skillruntime.core.tools.remote import format_text_read

    text = format_text_read("viking://x", b"a" * 5000 + b"\nb\n", None, None)
    assert "... (line truncated)" in text
    assert len(text) < 2200
    assert format_text_read("viking://x", b"", None, None).endswith("(empty file)\n")
    assert "past its end" in format_text_read("viking://x", b"one\n", 5, None)


def test_requirements_of_an_instruction_only_skill_are_checked_before_its_first_tool_call(
    viking: VikingDouble, tmp_path: Path, runtime: LocalSkillRuntime
) -> None:
    needy = "viking://user/default/skills/needy"
    viking.add_skill(
        needy,
        {
            "SKILL.md": b"---\nname: needy\ndescription: N.\nmetadata:\n  requires:\n"
            b"    env: [NEEDY_TURN_TEST_TOKEN]\n---\n\nNeeds a token.\n"
        },
    )
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        SkillTools(runtime, viking_skill_sources(store, [needy])) as tools,
        tools.turn() as turn,
    ):
        assert not turn.call(("skill", {"command": "needy"})).is_error
        refused = turn.call(("bash", {"command": "echo hi"}))
        assert refused.code == "SKILL_CAPABILITY_UNAVAILABLE"
        assert "env NEEDY_TURN_TEST_TOKEN" in refused.content
    assert sum(viking.downloads.values()) == 0
