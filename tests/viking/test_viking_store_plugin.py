"""The ``viking`` artifact store provider and the read-only SPI adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, demo_files, tree
from skillruntime.core.artifacts import (
    ArtifactInUseError,
    ArtifactStoreError,
    SkillArtifact,
    SkillPackage,
    open_artifact_store,
)
from skillruntime.core.plugins.registry import available_artifact_stores
from skillruntime.viking import SKILL_REVISION_CHANGED, VikingArtifactStore, VikingStoreError
from skillruntime.viking.plugin import server_url_from_store_url, skillruntime_cli


def test_provider_is_registered_for_the_viking_scheme() -> None:
    provider = available_artifact_stores()["viking"]
    assert provider.distribution == "skillruntime-viking"


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("viking://", None),
        ("viking:///", None),
        ("viking://127.0.0.1:1933", "http://127.0.0.1:1933"),
        ("viking+https://ov.example.com", "https://ov.example.com"),
        ("viking+http://h:1/", "http://h:1"),
    ],
)
def test_store_urls_name_the_server(url: str, server: str | None) -> None:
    assert server_url_from_store_url(url) == server


def test_open_artifact_store_builds_the_adapter(viking: VikingDouble, tmp_path: Path) -> None:
    url = viking.url.replace("http://", "viking://")
    with open_artifact_store(url, cache_dir=tmp_path / "c") as store:
        assert isinstance(store, VikingArtifactStore)
        assert store.store.options.server_url == viking.url
        artifact = store.artifact_for(DEMO_ROOT)
        assert artifact.name == "demo"
        assert artifact.version == viking.revision(DEMO_ROOT)
        assert artifact.storage_key == DEMO_ROOT
        with store.lease(artifact) as path:
            assert tree(path) == demo_files()
            with pytest.raises(ArtifactInUseError):
                store.delete(artifact)
        assert store.list_artifacts() == [artifact]
        store.delete(artifact)
        assert store.list_artifacts() == []


def test_adapter_is_read_only_and_pins_revisions(viking: VikingDouble, make_store: Any) -> None:
    adapter = VikingArtifactStore(make_store())
    artifact = adapter.artifact_for(DEMO_ROOT)
    with pytest.raises(ArtifactStoreError, match="read-only"):
        adapter.install(artifact, SkillPackage.from_bytes(b"PK"))
    viking.set_file(DEMO_ROOT, "scripts/run.sh", b"echo v2\n")
    with pytest.raises(VikingStoreError) as caught:
        adapter.materialize(artifact)
    assert caught.value.code == SKILL_REVISION_CHANGED
    current = adapter.artifact_for(DEMO_ROOT)
    assert (adapter.materialize(current) / "scripts/run.sh").read_bytes() == b"echo v2\n"
    with pytest.raises(ArtifactStoreError):
        adapter.materialize(SkillArtifact(name="demo", version="1"))
    adapter.close()


def test_cli_hook_delegates_to_the_cli_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillruntime.viking import cli

    seen: list[click.Group] = []
    monkeypatch.setattr(cli, "register", seen.append)
    group = click.Group("skillruntime")
    skillruntime_cli(group)
    assert seen == [group]
