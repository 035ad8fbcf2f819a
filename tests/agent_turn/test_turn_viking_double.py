"""Turns over OpenViking sources (protocol double): lease again each turn, cache reused,
revision and access re-checked; same-batch rule and canonical URIs for remote skills."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.viking import VikingDouble
from skillruntime.core.tools import SKILL_ACTIVATION_FAILED, SKILL_CONTEXT_UPDATED, SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/turn-greeter"
OTHER = "viking://user/default/skills/turn-other"
MARKER = "BODY-MARKER-7f3a"
SKILL_MD = f"""---
name: turn-greeter
description: Greets from the double.
allowed-tools: Bash(sh *) Read
---

{MARKER}: run `sh scripts/greet.sh`; the guide is references/guide.md.
""".encode()


def _script(word: str) -> bytes:
    return f"#!/bin/sh\necho {word} from the double\n".encode()


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(
            ROOT,
            {
                "SKILL.md": SKILL_MD,
                "scripts/greet.sh": _script("hello"),
                "references/guide.md": b"# Guide\nsecret-free guide\n",
            },
            description="Greets from the double.",
        )
        double.add_skill(
            OTHER,
            {"SKILL.md": b"---\nname: turn-other\ndescription: Another.\n---\n\nOther.\n"},
            description="Another.",
        )
        yield double


@pytest.fixture
def tools(viking: VikingDouble, tmp_path: Path) -> Iterator[SkillTools]:
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [ROOT, OTHER])) as opened,
    ):
        opened.store = store  # type: ignore[attr-defined]
        yield opened


def _store(tools: SkillTools) -> VikingSkillStore:
    store = tools.store  # type: ignore[attr-defined]
    assert isinstance(store, VikingSkillStore)
    return store


def test_each_turn_leases_again_and_reuses_the_cache(
    viking: VikingDouble, tools: SkillTools
) -> None:
    for _ in range(2):
        with tools.turn() as turn:
            reads = viking.skill_reads
            turn.dispatch("skill", {"command": "turn-greeter"})
            assert viking.skill_reads > reads  # the manifest was read again in this turn
            assert "hello from the double" in turn.dispatch(
                "bash", {"command": "sh scripts/greet.sh"}
            )
            assert [entry.leased for entry in _store(tools).cache_entries()] == [True]
        assert [entry.leased for entry in _store(tools).cache_entries()] == [False]
    assert viking.downloads[f"{ROOT}/scripts/greet.sh"] == 1


def test_a_new_revision_is_picked_up_by_the_next_turn(
    viking: VikingDouble, tools: SkillTools
) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "turn-greeter"})
        assert "hello" in turn.dispatch("bash", {"command": "sh scripts/greet.sh"})
        viking.set_file(ROOT, "scripts/greet.sh", _script("updated"))
        # Within the turn the leased revision stays in use.
        assert "hello" in turn.dispatch("bash", {"command": "sh scripts/greet.sh"})
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "turn-greeter"})
        assert "updated from the double" in turn.dispatch(
            "bash", {"command": "sh scripts/greet.sh"}
        )
    assert len({entry.revision for entry in _store(tools).cache_entries()}) == 2


def test_revoked_access_is_refused_on_the_next_turn_and_blocks_the_batch(
    viking: VikingDouble, tools: SkillTools
) -> None:
    with tools.turn() as turn:
        assert not turn.call(("skill", {"command": "turn-greeter"})).is_error
    with viking._lock:
        del viking.skills[("default", ROOT)]
    with tools.turn() as turn:
        results = turn.dispatch_batch(
            [
                ("bash", {"command": "sh scripts/greet.sh"}, "a"),
                ("skill", {"command": "turn-greeter"}, "b"),
            ]
        )
        assert [result.call_id for result in results] == ["a", "b"]
        assert results[1].is_error
        assert results[0].code == SKILL_ACTIVATION_FAILED
        assert turn.active_skills == []


def test_same_batch_activation_of_a_remote_skill_then_retry(tools: SkillTools) -> None:
    with tools.turn() as turn:
        first = turn.dispatch_batch(
            [
                {"name": "skill", "arguments": {"command": "turn-greeter"}, "id": "1"},
                {"name": "bash", "arguments": {"command": "sh scripts/greet.sh"}, "id": "2"},
            ]
        )
        assert first[0].usage.skill_uri == ROOT
        assert first[1].code == SKILL_CONTEXT_UPDATED
        retry = turn.dispatch_batch([("bash", {"command": "sh scripts/greet.sh"}, "3")])
        assert "hello from the double" in retry[0].content
        assert retry[0].usage.skill_uris == (ROOT,)


def test_canonical_uris_resolve_inside_the_active_skill_only(tools: SkillTools) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "turn-greeter"})
        guide = turn.call(("read", {"file_path": f"{ROOT}/references/guide.md"}))
        assert "secret-free guide" in guide.content
        assert guide.usage.skill_uris == (ROOT,)
        missing = turn.call(("read", {"file_path": f"{ROOT}/references/absent.md"}))
        assert missing.code == "SKILL_RESOURCE_NOT_FOUND"
        inactive = turn.call(("read", {"file_path": f"{OTHER}/SKILL.md"}))
        assert inactive.code == "SKILL_NOT_ACTIVE"
        escape = turn.call(("read", {"file_path": f"{ROOT}/../turn-other/SKILL.md"}))
        assert escape.code == "SKILL_RESOURCE_NOT_FOUND"
        encoded = turn.call(("read", {"file_path": f"{ROOT}/%2e%2e/turn-other/SKILL.md"}))
        assert encoded.code == "SKILL_RESOURCE_NOT_FOUND"
        stranger = turn.call(("read", {"file_path": "viking://user/x/skills/y/SKILL.md"}))
        assert stranger.code == "SKILL_RESOURCE_NOT_FOUND"


def test_persisted_views_of_a_remote_turn_hold_no_skill_body(tools: SkillTools) -> None:
    stored: list[dict[str, object]] = []
    with tools.turn() as turn:
        for batch in (
            [("skill", {"command": "turn-greeter"}, "1")],
            [
                ("read", {"file_path": "SKILL.md"}, "2"),
                ("bash", {"command": "sh -c 'echo plain'"}, "3"),
            ],
        ):
            results = turn.dispatch_batch(batch)
            assert MARKER in results[0].content  # the model view is complete
            stored.extend(result.persisted_view() for result in results)
    assert MARKER not in repr(stored)
    assert [view["skill_uri"] for view in stored] == [ROOT, ROOT, None]
    assert "plain" in str(stored[2]["content"])
