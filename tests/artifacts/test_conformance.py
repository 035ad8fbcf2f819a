"""The same store contract, run against the ZIP store and the object store (memory, file, S3)."""

from __future__ import annotations

import hashlib
import io
import stat
import threading
from pathlib import Path

import pytest
from artifact_helpers import good_zip, leftovers

from skillruntime.core.artifacts import (
    ArtifactExistsError,
    ArtifactIntegrityError,
    ArtifactInUseError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    SkillArtifact,
    SkillArtifactStore,
    SkillPackage,
)


def _install(store: SkillArtifactStore, version: str = "1.0.0", name: str = "pdf") -> SkillArtifact:
    return store.install(
        SkillArtifact(name=name, version=version), SkillPackage.from_bytes(good_zip(name))
    )


def test_install_returns_the_completed_artifact(store: SkillArtifactStore) -> None:
    data = good_zip()
    installed = store.install(
        SkillArtifact(name="pdf", version="1.0.0"), SkillPackage.from_bytes(data)
    )
    assert installed.name == "pdf"
    assert installed.version == "1.0.0"
    assert installed.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert installed.size == len(data)
    assert installed.storage_key
    assert store.list_artifacts() == [installed]


def test_lease_yields_a_directory_with_the_package_content(store: SkillArtifactStore) -> None:
    installed = _install(store)
    with store.lease(installed) as directory:
        assert directory.name == "pdf"  # Agent Skills: the directory is named after the skill
        assert (directory / "SKILL.md").read_text().startswith("---\nname: pdf\n")
        assert (directory / "reference" / "notes.txt").read_text() == "notes\n"
        script = directory / "scripts" / "run.py"
        assert script.stat().st_mode & stat.S_IXUSR
        assert not (directory / "reference" / "notes.txt").stat().st_mode & stat.S_IXUSR


def test_materialize_is_stable_for_one_artifact(store: SkillArtifactStore) -> None:
    installed = _install(store)
    assert store.materialize(installed) == store.materialize(installed)


def test_install_from_a_path_and_from_a_stream(store: SkillArtifactStore, tmp_path: Path) -> None:
    package = tmp_path / "pdf.zip"
    package.write_bytes(good_zip())
    from_path = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_path(package)
    )
    from_stream = store.install(
        SkillArtifact(name="pdf", version="2"),
        SkillPackage.from_stream(io.BytesIO(good_zip(extra=b"v2\n"))),
    )
    assert from_path.digest != from_stream.digest
    with store.lease(from_stream) as directory:
        assert (directory / "scripts" / "run.py").read_bytes() == b"v2\n"
    assert [a.version for a in store.list_artifacts()] == ["1", "2"]


def test_versions_are_immutable(store: SkillArtifactStore) -> None:
    _install(store)
    with pytest.raises(ArtifactExistsError):
        _install(store)


def test_delete_is_idempotent_and_removes_everything(store: SkillArtifactStore) -> None:
    installed = _install(store)
    store.materialize(installed)
    store.delete(installed)
    store.delete(installed)
    assert store.list_artifacts() == []
    assert leftovers(store) == []
    with pytest.raises(ArtifactNotFoundError):
        store.materialize(installed)


def test_delete_of_a_never_installed_artifact_succeeds(store: SkillArtifactStore) -> None:
    store.delete(SkillArtifact(name="ghost", version="1", digest="a" * 64))


def test_delete_refused_while_leased(store: SkillArtifactStore) -> None:
    installed = _install(store)
    with store.lease(installed), pytest.raises(ArtifactInUseError):
        store.delete(installed)
    store.delete(installed)


def test_a_deleted_version_can_be_installed_again(store: SkillArtifactStore) -> None:
    installed = _install(store)
    store.delete(installed)
    again = _install(store)
    assert again == installed


def test_materialize_of_a_missing_artifact_raises(store: SkillArtifactStore) -> None:
    with pytest.raises(ArtifactNotFoundError):
        store.materialize(SkillArtifact(name="pdf", version="9", digest="b" * 64))


def test_materialize_refuses_a_digest_other_than_installed(store: SkillArtifactStore) -> None:
    installed = _install(store)
    other = installed.model_copy(update={"digest": "sha256:" + "c" * 64, "storage_key": None})
    with pytest.raises((ArtifactIntegrityError, ArtifactNotFoundError)):
        store.materialize(other)


def test_a_storage_key_the_store_does_not_use_is_refused(cheap_store: SkillArtifactStore) -> None:
    foreign = SkillArtifact(name="pdf", version="1.0.0", storage_key="elsewhere/pdf.zip")
    with pytest.raises(ArtifactStoreError, match=r"'elsewhere/pdf\.zip' of pdf@1\.0\.0 is not"):
        cheap_store.install(foreign, SkillPackage.from_bytes(good_zip()))
    assert cheap_store.list_artifacts() == []
    assert leftovers(cheap_store) == []
    installed = _install(cheap_store)
    moved = installed.model_copy(update={"storage_key": "elsewhere/pdf.zip"})
    with pytest.raises(ArtifactStoreError, match="the key this store uses"):
        cheap_store.materialize(moved)
    with pytest.raises(ArtifactStoreError, match="the key this store uses"):
        cheap_store.delete(moved)
    assert cheap_store.list_artifacts() == [installed]


def test_several_versions_and_skills_are_listed_in_order(store: SkillArtifactStore) -> None:
    _install(store, "2.0.0")
    _install(store, "1.0.0")
    _install(store, "1.0.0", name="docx")
    listed = [(a.name, a.version) for a in store.list_artifacts()]
    assert listed == [("docx", "1.0.0"), ("pdf", "1.0.0"), ("pdf", "2.0.0")]


def test_concurrent_installs_of_one_version_publish_exactly_one(store: SkillArtifactStore) -> None:
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(i: int) -> None:
        try:
            store.install(
                SkillArtifact(name="pdf", version="1"),
                SkillPackage.from_bytes(good_zip(extra=f"{i}\n".encode())),
            )
            result = "ok"
        except ArtifactExistsError:
            result = "exists"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The ZIP store serializes publication; object storage can only check then put, so
    # racing installers may both succeed there (documented) but never corrupt each other.
    assert "ok" in outcomes
    for artifact in store.list_artifacts():
        with store.lease(artifact) as directory:
            assert (directory / "SKILL.md").is_file()


def test_zip_store_concurrent_installs_publish_exactly_one(tmp_path: Path) -> None:
    from skillruntime.core.artifacts import ZipSkillArtifactStore

    store = ZipSkillArtifactStore(tmp_path / "store")
    outcomes: list[str] = []

    def attempt(i: int) -> None:
        try:
            store.install(
                SkillArtifact(name="pdf", version="1"),
                SkillPackage.from_bytes(good_zip(extra=f"{i}\n".encode())),
            )
            outcomes.append("ok")
        except ArtifactExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["exists"] * 5 + ["ok"]
    assert len(store.list_artifacts()) == 1
