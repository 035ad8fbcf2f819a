"""``VikingSkillSource`` and ``viking_skill_sources`` over a scripted in-memory store.

The store here stands in for ``VikingSkillStore`` (same method names and shapes) so the source's
own contract — lazy description, one lease per load, release on close or failure, strict
``SKILL.md`` parsing, duplicate handling — is checked without a server. The end-to-end
behaviour against a real server is in ``test_viking_tools_real.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.skills import InvalidSkillError
from skillruntime.core.tools.toolset import SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillSummary, VikingStoreError
from skillruntime.viking.source import (
    VikingSkillSource,
    close_sources,
    skill_name_from_uri,
    viking_skill_sources,
)

USER_ROOT = "viking://user/u1/skills"
AGENT_ROOT = "viking://agent/skills"


@dataclass
class _Manifest:
    uri: str
    name: str
    description: str


class ScriptedStore:
    """Serves skill directories written under ``root``; records resolves and leases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.skills: dict[str, tuple[str, str]] = {}  # uri -> (name, description)
        self.resolved: list[str] = []
        self.leases = 0
        self.active = 0
        self.signatures: list[str | None] = []
        self.fail_resolve = False
        self.listing: dict[str, list[VikingSkillSummary]] = {}
        self._lock = threading.Lock()

    def add(self, uri: str, name: str, description: str, skill_md: str | None = None) -> None:
        self.skills[uri] = (name, description)
        directory = self._directory(uri)
        (directory / "scripts").mkdir(parents=True, exist_ok=True)
        (directory / "SKILL.md").write_text(
            skill_md or f"---\nname: {name}\ndescription: {description}\n---\n\nBody of {name}.\n"
        )
        (directory / "scripts" / "run.sh").write_text("echo ran\n")

    def _directory(self, uri: str) -> Path:
        """Named after the skill, like the directories the real store hands out."""
        return self.root / uri.replace("viking://", "").replace("/", "_") / self.skills[uri][0]

    def resolve(self, uri: str) -> _Manifest:
        self.resolved.append(uri)
        if self.fail_resolve or uri not in self.skills:
            raise VikingStoreError(f"no skill {uri}", code="SKILL_NOT_FOUND", uri=uri)
        name, description = self.skills[uri]
        return _Manifest(uri, name, description)

    def list_skills(self, scope: str | None = None) -> list[VikingSkillSummary]:
        return list(self.listing.get(scope or "", []))

    @contextmanager
    def lease(
        self,
        uri: str,
        *,
        progress: Callable[[int, int], None] | None = None,
        signature: str | None = None,
    ) -> Iterator[Path]:
        self.resolve(uri)
        self.signatures.append(signature)
        if progress is not None:
            progress(0, 10)
            progress(10, 10)
        with self._lock:
            self.leases += 1
            self.active += 1
        try:
            yield self._directory(uri)
        finally:
            with self._lock:
                self.active -= 1


@pytest.fixture
def store(tmp_path: Path) -> ScriptedStore:
    scripted = ScriptedStore(tmp_path / "store")
    scripted.add(f"{USER_ROOT}/pdf", "pdf", "Reads PDFs.")
    scripted.add(f"{AGENT_ROOT}/pdf", "pdf", "The shared PDF skill.")
    scripted.add(f"{AGENT_ROOT}/csv", "csv", "Reads CSV files.")
    return scripted


def _store(store: ScriptedStore) -> Any:
    return store


def test_names_come_from_skill_uris() -> None:
    assert skill_name_from_uri(f"{USER_ROOT}/pdf") == "pdf"
    assert skill_name_from_uri(f"{AGENT_ROOT}/csv-report/") == "csv-report"
    for bad in ("https://x/skills/pdf", "viking://user/skills/pdf", "viking://agent/skills"):
        with pytest.raises(VikingStoreError) as caught:
            skill_name_from_uri(bad)
        assert caught.value.code == "SKILL_INVALID"


def test_a_source_resolves_its_description_once_and_lazily(store: ScriptedStore) -> None:
    source = VikingSkillSource(_store(store), f"{USER_ROOT}/pdf")
    assert (source.name, source.location) == ("pdf", f"{USER_ROOT}/pdf")
    assert store.resolved == []
    assert source.description == "Reads PDFs."
    assert source.description == "Reads PDFs."
    assert store.resolved == [f"{USER_ROOT}/pdf"]
    assert store.leases == 0


def test_a_failed_description_lookup_shows_a_placeholder(store: ScriptedStore) -> None:
    store.fail_resolve = True
    source = VikingSkillSource(_store(store), f"{USER_ROOT}/pdf")
    assert source.description == "Skill pdf (remote, from OpenViking)"


def test_load_leases_once_passes_progress_and_close_releases(store: ScriptedStore) -> None:
    seen: list[tuple[int, int]] = []
    source = VikingSkillSource(
        _store(store), f"{USER_ROOT}/pdf", progress=lambda d, t: seen.append((d, t))
    )
    skill = source.load()
    assert skill.name == "pdf"
    assert "Body of pdf." in skill.body
    assert Path(skill.base_path) == source.directory
    assert source.load() is skill
    assert (store.leases, store.active) == (1, 1)
    assert seen == [(0, 10), (10, 10)]
    source.close()
    source.close()
    assert store.active == 0
    assert source.directory is None
    source.load()  # a new lease after close
    assert (store.leases, store.active) == (2, 1)
    assert store.signatures == [None, None]  # nothing pinned without load_instructions
    source.close()


def test_concurrent_loads_take_one_lease(store: ScriptedStore) -> None:
    source = VikingSkillSource(_store(store), f"{USER_ROOT}/pdf")
    barrier = threading.Barrier(6)
    results: list[str] = []

    def load() -> None:
        barrier.wait(timeout=10)
        results.append(source.load().name)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert results == ["pdf"] * 6
    assert store.leases == 1
    source.close()
    assert store.active == 0


def test_an_invalid_skill_md_is_refused_and_holds_no_lease(store: ScriptedStore) -> None:
    uri = f"{USER_ROOT}/broken"
    store.add(uri, "broken", "x", skill_md="---\nname: broken\n---\n\nNo description.\n")
    source = VikingSkillSource(_store(store), uri, description="Broken.")
    with pytest.raises(InvalidSkillError, match="description"):
        source.load()
    assert store.active == 0
    assert source.directory is None


def test_sources_from_uris_and_discovery_skip_duplicates(store: ScriptedStore) -> None:
    store.listing[AGENT_ROOT] = [
        VikingSkillSummary(uri=f"{AGENT_ROOT}/pdf", name="pdf", description="Shared."),
        VikingSkillSummary(uri=f"{AGENT_ROOT}/csv", name="csv", description="Reads CSV files."),
    ]
    sources = viking_skill_sources(_store(store), [f"{USER_ROOT}/pdf"], discover=AGENT_ROOT)
    assert [(s.name, s.location) for s in sources] == [
        ("pdf", f"{USER_ROOT}/pdf"),  # the user's own skill hides the shared one
        ("csv", f"{AGENT_ROOT}/csv"),
    ]
    assert [s.description for s in sources] == ["Reads PDFs.", "Reads CSV files."]
    assert store.leases == 0
    close_sources(sources)


def test_unresolved_sources_make_no_store_call(store: ScriptedStore) -> None:
    sources = viking_skill_sources(_store(store), [f"{USER_ROOT}/pdf"], resolve=False)
    assert [s.name for s in sources] == ["pdf"]
    assert store.resolved == []


def test_skill_tools_load_a_remote_source_on_first_use_and_release_it(
    store: ScriptedStore, tmp_path: Path
) -> None:
    sources = viking_skill_sources(_store(store), [f"{USER_ROOT}/pdf", f"{AGENT_ROOT}/csv"])
    with LocalSkillRuntime(work_root=tmp_path / "work") as runtime:
        with SkillTools(runtime, sources) as tools:
            assert tools.skill_names == ["pdf", "csv"]
            assert store.leases == 0
            result = tools.dispatch("skill", {"command": "csv"})
            assert "Body of csv." in result, result
            assert (store.leases, store.active) == (1, 1)
            prepared = tools.prepared_skill("csv")
            assert prepared is not None
            ran = tools.dispatch("bash", {"command": f"bash {prepared.base_path}/scripts/run.sh"})
            assert "ran" in ran, ran
        assert store.active == 0


def test_a_source_uri_is_normalized(store: ScriptedStore) -> None:
    source = VikingSkillSource(_store(store), f"{USER_ROOT}/pdf/SKILL.md")
    assert (source.name, source.location) == ("pdf", f"{USER_ROOT}/pdf")
    with pytest.raises(VikingStoreError):
        VikingSkillSource(_store(store), "viking://user/skills/pdf")
