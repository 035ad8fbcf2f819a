"""Materializing skills: verified downloads, atomic publication and refusals that leave nothing."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, demo_files, leftovers, tree
from skillruntime.viking import (
    SKILL_CACHE_CORRUPT,
    SKILL_REVISION_CHANGED,
    SKILL_UNAVAILABLE,
    VikingSkillStore,
    VikingStoreError,
)
from skillruntime.viking import cache as cache_module
from skillruntime.viking import store as store_module

FILE = f"{DEMO_ROOT}/assets/blob.bin"


def _assert_clean(cache_dir: Path, store: VikingSkillStore) -> None:
    assert store.cache_entries() == []
    assert leftovers(cache_dir) == []


def test_lease_yields_exact_package_with_private_permissions(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    with store.lease(DEMO_ROOT) as path:
        assert tree(path) == demo_files()
        for item in path.rglob("*"):
            mode = stat.S_IMODE(item.stat().st_mode)
            assert mode == (0o700 if item.is_dir() else 0o600), item
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert not (path / ".abstract.md").exists()
    assert set(viking.downloads) == {f"{DEMO_ROOT}/{p}" for p in demo_files()}


def test_second_lease_is_a_verified_hit_without_downloads(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    with store.lease(DEMO_ROOT) as first:
        pass
    reads = viking.skill_reads
    with store.lease(DEMO_ROOT) as second:
        assert second == first
        assert tree(second) == demo_files()
    assert all(count == 1 for count in viking.downloads.values())
    # The manifest is read again before using a hit.
    assert viking.skill_reads == reads + 1


def test_progress_reports_bytes_until_the_total(store: VikingSkillStore) -> None:
    calls: list[tuple[int, int]] = []
    total = sum(len(data) for data in demo_files().values())
    with store.lease(DEMO_ROOT, progress=lambda done, whole: calls.append((done, whole))):
        pass
    assert calls[0] == (0, total)
    assert calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    hits: list[tuple[int, int]] = []
    store.materialize(DEMO_ROOT, progress=lambda d, t: hits.append((d, t)))
    assert hits == [(total, total)]


def test_materialize_returns_the_cached_directory(store: VikingSkillStore) -> None:
    path = store.materialize(DEMO_ROOT)
    assert (path / "SKILL.md").is_file()
    assert [entry.path for entry in store.cache_entries()] == [path]
    assert store.cache_entries()[0].leased is False


def test_tampered_bytes_are_refused_and_nothing_remains(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    viking.faults.tamper.add(FILE)
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("an unverified package was handed out")
    assert caught.value.code == SKILL_REVISION_CHANGED
    _assert_clean(cache_dir, store)


def test_manifest_lying_about_a_size_is_refused(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    viking.faults.declared_sizes[FILE] = 10
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("an unverified package was handed out")
    assert caught.value.code == SKILL_REVISION_CHANGED
    _assert_clean(cache_dir, store)


def test_undeclared_bytes_stop_the_stream_at_the_first_chunk(
    viking: VikingDouble, make_store: Any, cache_dir: Path
) -> None:
    big = f"{DEMO_ROOT}/big.bin"
    viking.set_file(DEMO_ROOT, "big.bin", b"z" * 300_000)
    viking.faults.declared_sizes[big] = 10
    store = make_store(max_file_bytes=100_000, chunk_bytes=4096)
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("an unverified package was handed out")
    # The server sends more than it declared: refused as soon as the declared size is passed.
    assert caught.value.code == SKILL_REVISION_CHANGED
    assert "larger than its manifest entry" in str(caught.value)
    _assert_clean(cache_dir, store)


def test_revision_change_during_download_is_refused(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    viking.faults.change_on_download[FILE] = ("scripts/run.sh", b"#!/bin/sh\necho v2\n")
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("a package of a changed revision was handed out")
    assert caught.value.code == SKILL_REVISION_CHANGED
    _assert_clean(cache_dir, store)
    with store.lease(DEMO_ROOT) as path:
        assert (path / "scripts/run.sh").read_bytes() == b"#!/bin/sh\necho v2\n"


def test_server_dying_mid_stream_is_refused(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    viking.faults.die_mid_stream.add(FILE)
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("a truncated package was handed out")
    assert caught.value.code == SKILL_UNAVAILABLE
    _assert_clean(cache_dir, store)


def test_file_missing_on_download_is_refused(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    def drop_after_manifest(result: dict[str, Any]) -> None:
        viking.faults.manifest_hook = None
        del viking.skills[("default", DEMO_ROOT)]["references/guide.md"]

    viking.faults.manifest_hook = drop_after_manifest
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("an incomplete package was handed out")
    assert caught.value.code == "SKILL_NOT_FOUND"
    _assert_clean(cache_dir, store)


def test_corrupt_cache_entry_is_rebuilt_once(viking: VikingDouble, store: VikingSkillStore) -> None:
    path = store.materialize(DEMO_ROOT)
    os.chmod(path / "scripts/run.sh", 0o600)
    (path / "scripts/run.sh").write_bytes(b"#!/bin/sh\nrm -rf ~\n")
    with store.lease(DEMO_ROOT) as again:
        assert tree(again) == demo_files()
    assert viking.downloads[f"{DEMO_ROOT}/scripts/run.sh"] == 2


@pytest.mark.parametrize("damage", ["extra", "missing", "symlink"])
def test_other_cache_damage_is_detected(
    viking: VikingDouble, store: VikingSkillStore, damage: str
) -> None:
    path = store.materialize(DEMO_ROOT)
    if damage == "extra":
        (path / "planted.sh").write_bytes(b"echo planted\n")
    elif damage == "missing":
        (path / "references/guide.md").unlink()
    else:
        target = path / "scripts/run.sh"
        target.unlink()
        target.symlink_to("/etc/hostname")
    with store.lease(DEMO_ROOT) as again:
        assert tree(again) == demo_files()
        assert not (again / "scripts/run.sh").is_symlink()


def test_entry_still_corrupt_after_rebuild_is_cache_corrupt(
    viking: VikingDouble,
    store: VikingSkillStore,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = store.materialize(DEMO_ROOT)
    (path / "SKILL.md").write_bytes(b"tampered")

    def always_corrupt(snapshot: Path, manifest: Any) -> None:
        raise cache_module.CorruptSnapshotError("disk keeps flipping bits")

    monkeypatch.setattr(store_module, "verify_snapshot", always_corrupt)
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("a corrupt package was handed out")
    assert caught.value.code == SKILL_CACHE_CORRUPT
    _assert_clean(cache_dir, store)


def test_unwritable_cache_is_bypassed_with_a_warning(
    viking: VikingDouble, make_store: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="skillruntime.viking"):
        store = make_store(cache_dir=blocker / "cache")
    assert store.cache_available is False
    assert any("not usable" in record.getMessage() for record in caplog.records)
    with store.lease(DEMO_ROOT) as path:
        assert tree(path) == demo_files()
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists()
    kept = store.materialize(DEMO_ROOT)
    assert (kept / "SKILL.md").is_file()
    store.close()
    assert not kept.exists()


def test_cache_write_failure_is_bypassed_per_call(
    viking: VikingDouble,
    store: VikingSkillStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = cache_module.SnapshotCache.new_staging

    def full_disk(self: Any, key: Any) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.SnapshotCache, "new_staging", full_disk)
    with caplog.at_level(logging.WARNING), store.lease(DEMO_ROOT) as path:
        assert tree(path) == demo_files()
        assert "cache=bypassed" in caplog.text
    monkeypatch.setattr(cache_module.SnapshotCache, "new_staging", original)
    assert store.cache_entries() == []


def test_stale_staging_directories_are_swept(store: VikingSkillStore, cache_dir: Path) -> None:
    stale = cache_dir / "v1" / ".partial-0123456789abcdef0123456789abcdef01234567-abc"
    (stale / "snapshot").mkdir(parents=True)
    (stale / "snapshot" / "x").write_bytes(b"half")
    trash = cache_dir / "v1" / ".trash-abc"
    trash.mkdir()
    store.prune()
    assert leftovers(cache_dir) == []


def test_skill_md_bytes_match_the_content_hash(store: VikingSkillStore) -> None:
    manifest = store.resolve(DEMO_ROOT)
    with store.lease(DEMO_ROOT) as path:
        data = (path / "SKILL.md").read_bytes()
    assert hashlib.sha256(data).hexdigest() == manifest.content_sha256


def test_closed_store_refuses_use(make_store: Any) -> None:
    store = make_store()
    store.close()
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.materialize(DEMO_ROOT)


def test_directory_is_named_after_the_skill_and_loads(store: VikingSkillStore) -> None:
    from skillruntime.core.skills import load_skill

    with store.lease(DEMO_ROOT) as path:
        assert path.name == "demo"
        skill = load_skill(path, strict=True)
        assert skill is not None
        assert skill.name == "demo"


def test_staging_of_a_running_download_is_not_swept(
    store: VikingSkillStore, cache_dir: Path
) -> None:
    from skillruntime.viking.locks import HostLock

    ident = "0123456789abcdef0123456789abcdef01234567"
    busy = cache_dir / "v1" / f".partial-{ident}-abc"
    busy.mkdir()
    with HostLock.acquire(cache_dir / "v1" / "locks" / f"{ident}.build", shared=False, timeout=5):
        store.prune()
        assert busy.exists()
    store.prune()
    assert not busy.exists()


@pytest.mark.parametrize("concurrency", [1, 8])
def test_download_concurrency_settings(
    viking: VikingDouble, make_store: Any, cache_dir: Path, concurrency: int
) -> None:
    store = make_store(download_concurrency=concurrency)
    viking.faults.tamper.add(FILE)
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT):
        pytest.fail("an unverified package was handed out")
    assert caught.value.code == SKILL_REVISION_CHANGED
    _assert_clean(cache_dir, store)
    viking.faults.tamper.clear()
    with store.lease(DEMO_ROOT) as path:
        assert tree(path) == demo_files()


def _fingerprinted_hit(store: VikingSkillStore, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Materialize, then hit once with no racy window so every fingerprint gets recorded."""
    path = store.materialize(DEMO_ROOT)
    monkeypatch.setattr(cache_module, "RACY_NS", 0)
    with store.lease(DEMO_ROOT):
        pass
    return path


def test_warm_hit_with_recorded_fingerprints_reads_no_cached_byte(
    viking: VikingDouble, store: VikingSkillStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fingerprinted_hit(store, monkeypatch)
    hashed: list[Path] = []
    real = cache_module.hash_file

    def counting(path: Path, chunk: int = 1 << 20) -> tuple[int, str]:
        hashed.append(path)
        return real(path, chunk)

    monkeypatch.setattr(cache_module, "hash_file", counting)
    with store.lease(DEMO_ROOT) as again:
        assert tree(again) == demo_files()
    assert hashed == []
    assert viking.downloads[f"{DEMO_ROOT}/SKILL.md"] == 1


def test_tamper_keeping_size_and_mtime_is_detected(
    viking: VikingDouble, store: VikingSkillStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _fingerprinted_hit(store, monkeypatch)
    target = path / "scripts/run.sh"
    before = target.stat()
    original = target.read_bytes()
    os.chmod(target, 0o600)
    target.write_bytes(bytes(b ^ 0x01 for b in original))
    os.chmod(target, stat.S_IMODE(before.st_mode))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with store.lease(DEMO_ROOT) as again:
        assert tree(again) == demo_files()
    assert viking.downloads[f"{DEMO_ROOT}/scripts/run.sh"] == 2


def test_racy_fingerprints_are_not_recorded(
    viking: VikingDouble, store: VikingSkillStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store.materialize(DEMO_ROOT)
    monkeypatch.setattr(cache_module, "RACY_NS", 10**18)
    manifest = store.resolve(DEMO_ROOT)
    assert cache_module.verify_snapshot(path, manifest) == {}
    monkeypatch.setattr(cache_module, "RACY_NS", 0)
    recorded = cache_module.verify_snapshot(path, manifest)
    assert set(recorded) == {item.path for item in manifest.files}


def test_a_pinned_lease_refuses_a_newer_revision_before_downloading(
    viking: VikingDouble, store: VikingSkillStore, cache_dir: Path
) -> None:
    pinned = store.resolve(DEMO_ROOT).signature
    with store.lease(DEMO_ROOT, signature=pinned) as path:  # the pinned revision is served
        assert tree(path) == demo_files()
    viking.set_file(DEMO_ROOT, "scripts/run.sh", b"#!/bin/sh\necho v2\n")
    downloads = sum(viking.downloads.values())
    with pytest.raises(VikingStoreError) as caught, store.lease(DEMO_ROOT, signature=pinned):
        pytest.fail("a package of another revision than the pinned one was handed out")
    assert caught.value.code == SKILL_REVISION_CHANGED
    assert sum(viking.downloads.values()) == downloads
    assert [entry.revision for entry in store.cache_entries()] != [viking.revision(DEMO_ROOT)]


def test_a_pinned_file_read_refuses_a_newer_revision(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    pinned = store.resolve(DEMO_ROOT).signature
    guide = demo_files()["references/guide.md"]
    assert store.read_file(DEMO_ROOT, "references/guide.md", signature=pinned) == guide
    viking.set_file(DEMO_ROOT, "references/guide.md", b"# Guide v2\n")
    downloads = sum(viking.downloads.values())
    with pytest.raises(VikingStoreError) as caught:
        store.read_file(DEMO_ROOT, "references/guide.md", signature=pinned)
    assert caught.value.code == SKILL_REVISION_CHANGED
    assert sum(viking.downloads.values()) == downloads
    assert store.read_file(DEMO_ROOT, "references/guide.md") == b"# Guide v2\n"
