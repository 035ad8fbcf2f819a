"""Both snapshot stores (a directory; fsspec memory and S3 against moto): objects, manifests,
integrity, retention, and retention racing a snapshot being stored."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.errors import (
    SnapshotIntegrityError,
    SnapshotNotFoundError,
    SnapshotStoreError,
)
from skillruntime.core.snapshots import (
    Entry,
    LocalSnapshotStore,
    Manifest,
    ObjectSnapshotStore,
    SnapshotStore,
)
from skillruntime.core.snapshots.spi import conversation_key

WHEN = datetime(2026, 12, 7, 5, 40, tzinfo=UTC)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(store: SnapshotStore, data: bytes) -> str:
    key = digest(data)
    store.put_object(key, io.BytesIO(data), size=len(data))
    return key


def manifest_of(
    conversation: str, files: dict[str, bytes], *, minutes: int = 0, parent: str | None = None
) -> Manifest:
    entries = [Entry(path="src", kind="directory", mode=0o755)]
    entries += [
        Entry(path=f"src/{name}", kind="file", mode=0o644, size=len(data), digest=digest(data))
        for name, data in files.items()
    ]
    return Manifest(
        conversation=conversation,
        created=WHEN + timedelta(minutes=minutes),
        parent=parent,
        entries=tuple(entries),
    )


def snapshot(store: SnapshotStore, conversation: str, files: dict[str, bytes], **kw: Any) -> str:
    for data in files.values():
        put(store, data)
    return store.put_manifest(manifest_of(conversation, files, **kw))


def test_objects_round_trip_and_a_second_put_uploads_nothing(store: SnapshotStore) -> None:
    data = b"hello\n" * 1000
    key = digest(data)
    assert store.has_objects([key]) == set()
    assert store.put_object(key, io.BytesIO(data)) is True
    assert store.put_object(key, io.BytesIO(data)) is False
    assert store.put_object(key, io.BytesIO(b"not even read")) is False
    assert store.has_objects([key, digest(b"other")]) == {key}
    with store.get_object(key) as stream:
        assert stream.read() == data


def test_a_stream_that_does_not_match_its_digest_stores_nothing(store: SnapshotStore) -> None:
    key = digest(b"expected")
    with pytest.raises(SnapshotIntegrityError) as caught:
        store.put_object(key, io.BytesIO(b"something else"))
    assert caught.value.code == "DIGEST_MISMATCH"
    assert store.has_objects([key]) == set()
    with pytest.raises(SnapshotIntegrityError, match="SIZE_MISMATCH"):
        store.put_object(key, io.BytesIO(b"expected"), size=99)
    with pytest.raises(SnapshotNotFoundError):
        store.get_object(key)
    with pytest.raises(SnapshotStoreError):
        store.put_object("../../etc/passwd", io.BytesIO(b""))


def _object_location(store: SnapshotStore, key: str) -> tuple[Any, str]:
    if isinstance(store, LocalSnapshotStore):
        return None, str(store.root / "objects" / key[:2] / key)
    assert isinstance(store, ObjectSnapshotStore)
    return store.filesystem, store._object_path(key)


def test_a_flipped_byte_in_a_stored_object_raises_and_returns_nothing(
    store: SnapshotStore,
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    key = put(store, data)
    filesystem, location = _object_location(store, key)
    corrupted = bytearray(data)
    corrupted[len(data) // 2] ^= 0x01
    if filesystem is None:
        Path(location).write_bytes(bytes(corrupted))
    else:
        filesystem.pipe_file(location, bytes(corrupted))
        filesystem.invalidate_cache()
    with pytest.raises(SnapshotIntegrityError) as caught:
        store.get_object(key)
    assert caught.value.code == "DIGEST_MISMATCH"


def test_manifests_are_stored_listed_read_and_deleted(store: SnapshotStore) -> None:
    first = snapshot(store, "conv/1 with spaces", {"a.txt": b"a"})
    second = snapshot(store, "conv/1 with spaces", {"a.txt": b"a", "b": b"b"}, minutes=1)
    other = snapshot(store, "conv-2", {"c": b"c"})
    refs = store.list_snapshots("conv/1 with spaces")
    assert [ref.snapshot_id for ref in refs] == [first, second]
    assert store.get_manifest("conv/1 with spaces", second).snapshot_id == second
    latest = store.latest("conv/1 with spaces")
    assert latest is not None
    assert latest.snapshot_id == second
    assert [ref.snapshot_id for ref in store.list_snapshots("conv-2")] == [other]
    with pytest.raises(SnapshotNotFoundError):
        store.get_manifest("conv-2", first)  # another conversation's snapshot
    store.delete_snapshot("conv/1 with spaces", first)
    assert [ref.snapshot_id for ref in store.list_snapshots("conv/1 with spaces")] == [second]
    assert store.list_snapshots("nobody") == []
    assert store.latest("nobody") is None


def test_a_manifest_whose_objects_are_missing_is_refused(store: SnapshotStore) -> None:
    with pytest.raises(SnapshotStoreError, match="not in the store"):
        store.put_manifest(manifest_of("c", {"a": b"never uploaded"}))
    assert store.list_snapshots("c") == []


def test_a_tampered_manifest_is_refused_on_read(store: SnapshotStore) -> None:
    snapshot_id = snapshot(store, "c", {"a": b"a"})
    name = next(iter(store._manifest_names(conversation_key("c"))))
    data = store._read_manifest(conversation_key("c"), name).replace(b'"mode":420', b'"mode":511')
    store._write_manifest(conversation_key("c"), name, data)
    with pytest.raises(SnapshotIntegrityError, match="MANIFEST_MISMATCH"):
        store.get_manifest("c", snapshot_id)


def test_keep_last_deletes_old_manifests_and_sweeps_what_nothing_references(
    store: SnapshotStore,
) -> None:
    shared, old, new = b"shared by all", b"only in the first", b"only in the last"
    ids = [
        snapshot(store, "c", {"s": shared, "o": old}),
        snapshot(store, "c", {"s": shared}, minutes=1),
        snapshot(store, "c", {"s": shared, "n": new}, minutes=2),
    ]
    snapshot(store, "other", {"o": old}, minutes=3)  # another conversation still needs it
    result = store.keep_last("c", 1, grace_seconds=0)
    assert result.deleted_snapshots == tuple(ids[:2])
    assert result.deleted_objects == ()
    assert store.has_objects(map(digest, (shared, old, new))) == set(
        map(digest, (shared, old, new))
    )
    for ref in store.list_snapshots("other"):
        store.delete_snapshot("other", ref.snapshot_id)
    result = store.keep_last("c", 1, grace_seconds=0)
    assert result.deleted_objects == (digest(old),)
    manifest = store.get_manifest("c", ids[2])
    for entry in manifest.files:
        assert entry.digest is not None
        with store.get_object(entry.digest) as stream:
            assert digest(stream.read()) == entry.digest
    with pytest.raises(SnapshotStoreError):
        store.keep_last("c", 0)


def test_the_grace_spares_young_unreferenced_objects(store: SnapshotStore) -> None:
    key = put(store, b"uploaded, manifest not stored yet")
    assert store.sweep(grace_seconds=3600).deleted_objects == ()
    assert store.has_objects([key]) == {key}
    assert store.sweep(grace_seconds=0).deleted_objects == (key,)


def test_retention_racing_a_snapshot_being_stored_keeps_its_objects(
    store: SnapshotStore,
) -> None:
    """A writer uploads objects and then stores manifests while another thread runs keep_last
    in a loop with the default grace: every manifest stored stays whole."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def retention() -> None:
        try:
            while not stop.is_set():
                store.keep_last("c", 1)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    sweeper = threading.Thread(target=retention)
    sweeper.start()
    try:
        for round_ in range(8):
            files = {f"f{n}": f"{round_}-{n}".encode() for n in range(3)}
            files["shared"] = b"same every round"
            snapshot(store, "c", files, minutes=round_)
            time.sleep(0.01)
    finally:
        stop.set()
        sweeper.join()
    assert not errors
    latest = store.latest("c")
    assert latest is not None
    needed = latest.digests()
    assert store.has_objects(needed) == needed


def test_an_old_orphan_reused_through_has_objects_is_freshened_and_spared(
    tmp_path: Path,
) -> None:
    store = LocalSnapshotStore(tmp_path / "store")
    key = put(store, b"orphan, reused by a new snapshot")
    location = store.root / "objects" / key[:2] / key
    old = time.time() - 7200
    os.utime(location, (old, old))
    assert store.has_objects([key]) == {key}  # freshened: young again
    assert store.sweep(grace_seconds=3600).deleted_objects == ()
    os.utime(location, (old, old))
    assert store.sweep(grace_seconds=3600).deleted_objects == (key,)


def test_the_object_store_freshens_an_object_reported_present(
    object_store: ObjectSnapshotStore,
) -> None:
    store = object_store
    key = put(store, b"reused")
    before = store._object_listing()[key]
    time.sleep(1.1)  # S3 times have a resolution of one second
    assert store.has_objects([key]) == {key}
    assert store._object_listing()[key] > before
    many = {digest(bytes([n])) for n in range(40)}  # more folders than the per-folder listing
    assert store.has_objects(many | {key}) == {key}


def test_the_s3_store_sets_timeouts(moto_endpoint: str) -> None:
    built = ObjectSnapshotStore(
        "s3://bucket/prefix",
        storage_options={"client_kwargs": {"endpoint_url": moto_endpoint}},
        timeout=7,
    )
    config = built.filesystem.config_kwargs
    assert config["connect_timeout"] == 7
    assert config["read_timeout"] == 7
