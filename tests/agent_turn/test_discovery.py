"""Rule 6: discovery by query (top-K, threshold, timeout fallback) and name precedence."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_turn.helpers import MakeSkill
from doubles.viking import VikingDouble
from skillruntime.core.skills import load_skill
from skillruntime.core.tools import LoadedSkillSource, SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore, VikingStoreError
from skillruntime.viking.source import VikingSkillSource, discover_skill_sources

KEY = "discovery-secret-key-123"


def _skill(name: str, description: str) -> dict[str, bytes]:
    return {"SKILL.md": f"---\nname: {name}\ndescription: {description}\n---\n\n{name}\n".encode()}


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble(api_keys={KEY: ("default", "alice")}) as double:
        for root, description in [
            ("viking://user/alice/skills/release-audit", "audit a release and report risks"),
            ("viking://agent/skills/release-audit", "shared audit of a release"),
            ("viking://agent/skills/release-notes", "write release notes"),
            ("viking://user/alice/skills/pdf-fill", "fill pdf forms"),
            ("viking://agent/skills/csv-report", "profile a csv file"),
        ]:
            name = root.rpartition("/")[2]
            double.add_skill(root, _skill(name, description), description=description)
        yield double


@pytest.fixture
def store(viking: VikingDouble, tmp_path: Path) -> Iterator[VikingSkillStore]:
    with VikingSkillStore(
        server_url=viking.url, api_key=KEY, user="alice", cache_dir=tmp_path / "cache"
    ) as opened:
        yield opened


def test_top_k_above_the_threshold_user_scope_first(
    store: VikingSkillStore, viking: VikingDouble
) -> None:
    sources = discover_skill_sources(store, "audit the release", score_threshold=0.2)
    # The shared release-audit scores higher (1/3 against 2/7) but the user's own one wins.
    assert [(s.name, s.location) for s in sources] == [
        ("release-audit", "viking://user/alice/skills/release-audit"),
        ("release-notes", "viking://agent/skills/release-notes"),
    ]
    by_name = {s.name: s for s in sources}
    assert by_name["release-audit"].location == "viking://user/alice/skills/release-audit"
    assert isinstance(by_name["release-audit"], VikingSkillSource)
    assert by_name["release-audit"].origin == "openviking_user"
    assert "pdf-fill" not in by_name  # scored below the threshold
    assert viking.downloads == {}  # nothing downloaded
    assert len(discover_skill_sources(store, "release", score_threshold=0.0, limit=2)) == 2


def test_local_skills_win_over_remote_ones_of_the_same_name(
    store: VikingSkillStore, make_skill: MakeSkill
) -> None:
    skill = load_skill(make_skill("release-audit"))
    assert skill is not None
    local = LoadedSkillSource(skill)
    sources = discover_skill_sources(store, "release audit notes", local=[local], score_threshold=0)
    assert sources[0] is local
    assert [s.name for s in sources].count("release-audit") == 1
    notes = next(s for s in sources if s.name == "release-notes")
    assert isinstance(notes, VikingSkillSource)
    assert notes.origin == "openviking_shared"


@pytest.mark.parametrize("fault", ["timeout", "unavailable"])
def test_a_failed_or_slow_search_falls_back_to_local_skills(
    store: VikingSkillStore,
    viking: VikingDouble,
    make_skill: MakeSkill,
    caplog: pytest.LogCaptureFixture,
    fault: str,
) -> None:
    if fault == "timeout":
        viking.faults.find_delay = 3.0
    else:
        viking.faults.find_unavailable = True
    skill = load_skill(make_skill("local-one"))
    assert skill is not None
    caplog.set_level(logging.INFO)
    sources = discover_skill_sources(
        store, "audit", local=[LoadedSkillSource(skill)], timeout_seconds=0.5
    )
    assert [s.name for s in sources] == ["local-one"]
    assert "skill discovery failed" in caplog.text
    assert KEY not in caplog.text


def test_a_search_interrupted_by_concurrent_adds_is_asked_again(
    store: VikingSkillStore, viking: VikingDouble
) -> None:
    # The real server answers 500 INTERNAL when skills are added while a search pages through
    # its index; the same search a moment later succeeds.
    viking.faults.interrupted_finds = 2
    before = viking.finds
    sources = discover_skill_sources(store, "audit the release", score_threshold=0.2)
    assert [s.name for s in sources] == ["release-audit", "release-notes"]
    assert viking.finds - before == 3


def test_a_search_that_keeps_failing_is_reported_after_its_retries(
    viking: VikingDouble, tmp_path: Path
) -> None:
    viking.faults.interrupted_finds = 1_000
    with (
        VikingSkillStore(
            server_url=viking.url,
            api_key=KEY,
            user="alice",
            cache_dir=tmp_path / "cache",
            busy_retries=2,
            busy_backoff_seconds=0.01,
        ) as store,
        pytest.raises(VikingStoreError) as failed,
    ):
        store.find_skills("audit the release", score_threshold=0.2)
    assert failed.value.code == "SKILL_UNAVAILABLE"
    assert "HTTP 500 INTERNAL" in str(failed.value)
    assert KEY not in str(failed.value)
    assert viking.finds == 3  # the first try and busy_retries more


def test_discovered_sources_feed_a_turn(
    store: VikingSkillStore, runtime: LocalSkillRuntime
) -> None:
    sources = discover_skill_sources(store, "fill pdf forms", score_threshold=0.3)
    with SkillTools(runtime, sources) as tools, tools.turn() as turn:
        assert "<name>pdf-fill</name>" in tools.get("skill").description  # type: ignore[union-attr]
        assert not turn.call(("skill", {"command": "pdf-fill"})).is_error
