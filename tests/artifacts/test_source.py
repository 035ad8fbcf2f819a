"""Artifacts handed to the skill tools: loaded lazily, on first use, under a lease."""

from __future__ import annotations

from pathlib import Path

import pytest
from artifact_helpers import good_zip

from skillruntime.core.artifacts import (
    ArtifactInUseError,
    ArtifactSkillSource,
    SkillArtifact,
    SkillPackage,
    ZipSkillArtifactStore,
)


class _CountingStore(ZipSkillArtifactStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.materialized = 0

    def materialize(self, artifact: SkillArtifact) -> Path:
        self.materialized += 1
        return super().materialize(artifact)


def test_source_materializes_only_on_load_and_holds_a_lease(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path)
    installed = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    source = ArtifactSkillSource(store, installed, description="Read PDFs.")
    assert (source.name, source.description) == ("pdf", "Read PDFs.")
    assert source.location == f"artifact:pdf@1#{installed.digest}"
    assert store.materialized == 0

    skill = source.load()
    assert skill.name == "pdf"
    assert (Path(skill.base_path) / "SKILL.md").is_file()
    assert source.load() is skill
    assert store.materialized == 1
    with pytest.raises(ArtifactInUseError):
        store.delete(installed)
    source.close()
    source.close()
    store.delete(installed)


def test_source_is_a_skill_source_for_the_tools(tmp_path: Path) -> None:
    from skillruntime.core.tools.skill import SkillSource

    store = ZipSkillArtifactStore(tmp_path)
    installed = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    assert isinstance(ArtifactSkillSource(store, installed), SkillSource)


def test_failed_load_releases_the_lease(tmp_path: Path) -> None:
    store = ZipSkillArtifactStore(tmp_path)
    missing = SkillArtifact(name="pdf", version="9")
    source = ArtifactSkillSource(store, missing)
    with pytest.raises(Exception, match="not installed"):
        source.load()
    installed = store.install(
        SkillArtifact(name="pdf", version="9"), SkillPackage.from_bytes(good_zip())
    )
    store.delete(installed)  # no lease was left behind by the failed load


def test_skill_tools_materialize_an_artifact_on_the_first_skill_call(tmp_path: Path) -> None:
    from skillruntime.core.tools.toolset import SkillTools
    from skillruntime.local import LocalSkillRuntime

    store = _CountingStore(tmp_path / "store")
    installed = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    with ArtifactSkillSource(store, installed, description="Read PDFs.") as source:
        runtime = LocalSkillRuntime(work_root=tmp_path / "work")
        try:
            tools = SkillTools(runtime, [source])
            assert store.materialized == 0
            result = tools.dispatch("skill", {"name": "pdf"})
            assert "Body of pdf." in result, result
            assert store.materialized == 1
            tools.dispatch("skill", {"name": "pdf"})
            assert store.materialized == 1
        finally:
            runtime.close()


def test_closing_the_tools_releases_artifact_leases(tmp_path: Path) -> None:
    from skillruntime.core.tools.toolset import SkillTools
    from skillruntime.local import LocalSkillRuntime

    store = _CountingStore(tmp_path / "store")
    installed = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    with LocalSkillRuntime(work_root=tmp_path / "work") as runtime:
        with SkillTools(runtime, [ArtifactSkillSource(store, installed)]) as tools:
            assert "Body of pdf." in tools.dispatch("skill", {"name": "pdf"})
            with pytest.raises(ArtifactInUseError):
                store.delete(installed)
        store.delete(installed)
    assert store.materialized == 1
