"""The host cache: keys per permission scope, idle TTL, LRU by count and bytes, leases."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import preloaded_python
from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, SKILL_MD, Clock, demo_files, tree
from doubles.viking.workers import hold_lease
from skillruntime.viking import VikingSkillStore

DEMO_BYTES = sum(len(data) for data in demo_files().values())


def _add(viking: VikingDouble, count: int, size: int = 100) -> list[str]:
    uris = []
    for index in range(count):
        uri = f"viking://user/default/skills/s{index}"
        viking.add_skill(uri, {"SKILL.md": SKILL_MD, "data.bin": bytes([index]) * size})
        uris.append(uri)
    return uris


def test_cache_entries_describe_snapshots(store: VikingSkillStore, clock: Clock) -> None:
    manifest = store.resolve(DEMO_ROOT)
    with store.lease(DEMO_ROOT) as path:
        (entry,) = store.cache_entries()
        assert entry.leased is True
        assert entry.path == path
    (entry,) = store.cache_entries()
    assert entry.leased is False
    assert entry.root_uri == DEMO_ROOT
    assert entry.revision == manifest.revision
    assert entry.size == DEMO_BYTES
    assert entry.last_used.timestamp() == clock.now
    assert len(entry.key.split("/")) == 3


def test_idle_entries_expire_after_the_ttl(
    viking: VikingDouble, store: VikingSkillStore, clock: Clock
) -> None:
    store.materialize(DEMO_ROOT)
    clock.advance(599)
    assert store.prune() == 0
    store.materialize(DEMO_ROOT)  # a hit refreshes the idle clock
    clock.advance(599)
    assert store.prune() == 0
    clock.advance(1)
    assert store.prune() == 1
    assert store.cache_entries() == []
    store.materialize(DEMO_ROOT)
    assert viking.downloads[f"{DEMO_ROOT}/SKILL.md"] == 2


def test_expired_entry_is_not_a_hit(
    viking: VikingDouble, store: VikingSkillStore, clock: Clock
) -> None:
    store.materialize(DEMO_ROOT)
    clock.advance(600)
    with store.lease(DEMO_ROOT) as path:
        assert tree(path) == demo_files()
    assert viking.downloads[f"{DEMO_ROOT}/SKILL.md"] == 2


def test_lru_eviction_by_count_keeps_the_most_recent(
    viking: VikingDouble, make_store: Any, clock: Clock
) -> None:
    uris = _add(viking, 5)
    store = make_store(cache_max_entries=3)
    for uri in uris:
        store.materialize(uri)
        clock.advance(1)
    store.materialize(uris[0])  # uri 0 becomes the most recent
    assert {entry.root_uri for entry in store.cache_entries()} == {uris[0], uris[3], uris[4]}


def test_lru_eviction_by_bytes(viking: VikingDouble, make_store: Any, clock: Clock) -> None:
    uris = _add(viking, 4, size=1000)
    per_entry = len(SKILL_MD) + 1000
    store = make_store(cache_max_bytes=2 * per_entry)
    for uri in uris:
        store.materialize(uri)
        clock.advance(1)
    entries = store.cache_entries()
    assert [entry.root_uri for entry in entries] == uris[2:]
    assert sum(entry.size for entry in entries) <= 2 * per_entry


def test_leased_entries_are_never_evicted(
    viking: VikingDouble, make_store: Any, clock: Clock
) -> None:
    uris = _add(viking, 4)
    store = make_store(cache_max_entries=1)
    with store.lease(uris[0]) as held:
        for uri in uris[1:]:
            clock.advance(1000)
            store.materialize(uri)
        clock.advance(1000)
        assert store.prune(everything=True) >= 1
        assert (held / "SKILL.md").read_bytes() == SKILL_MD
        assert [entry.root_uri for entry in store.cache_entries()] == [uris[0]]
    clock.advance(1000)
    assert store.prune() == 1
    assert store.cache_entries() == []


def test_a_lease_in_another_process_protects_the_entry(
    viking: VikingDouble, make_store: Any, cache_dir: Path, clock: Clock
) -> None:
    store = make_store()
    options = {"server_url": viking.url, "cache_dir": str(cache_dir)}
    context = preloaded_python.CONTEXT
    manager = context.Manager()
    with manager:
        ready, release = manager.Event(), manager.Event()
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            future = pool.submit(hold_lease, options, DEMO_ROOT, ready, release)
            assert ready.wait(timeout=60)
            (entry,) = store.cache_entries()
            assert entry.leased is True
            clock.advance(10_000)
            assert store.prune(everything=True) == 0
            assert (entry.path / "SKILL.md").is_file()
            release.set()
            assert future.result(timeout=60) == str(entry.path)
    assert store.prune(everything=True) == 1


def test_cache_keys_separate_permission_scopes(viking: VikingDouble, make_store: Any) -> None:
    viking.add_skill(DEMO_ROOT, demo_files(), account="acme")
    make_store().materialize(DEMO_ROOT)
    make_store(account="acme").materialize(DEMO_ROOT)
    make_store(agent="bot-1").materialize(DEMO_ROOT)
    make_store(server_url=viking.url + "/").materialize(DEMO_ROOT)
    entries = make_store().cache_entries()
    # Same root URI and revision, three scopes (the trailing slash is normalised away).
    assert len({entry.key.split("/")[0] for entry in entries}) == 3
    assert len({entry.path for entry in entries}) == 3


def test_api_key_is_only_hashed_into_the_key_without_a_stable_user(
    make_store: Any,
) -> None:
    keys = {"key-one": ("default", "bob"), "key-two": ("default", "bob")}
    with VikingDouble(api_keys=keys) as double:
        double.add_skill("viking://user/bob/skills/demo", {"SKILL.md": SKILL_MD})
        uri = "viking://user/bob/skills/demo"
        make_store(server_url=double.url, api_key="key-one").materialize(uri)
        make_store(server_url=double.url, api_key="key-two").materialize(uri)
        scopes = {entry.key.split("/")[0] for entry in make_store().cache_entries()}
        assert len(scopes) == 2
        make_store(server_url=double.url, api_key="key-one", user="bob").materialize(uri)
        make_store(server_url=double.url, api_key="key-two", user="bob").materialize(uri)
        scopes = {entry.key.split("/")[0] for entry in make_store().cache_entries()}
        assert len(scopes) == 3
        cache_text = " ".join(
            p.as_posix() for p in make_store().options.resolved_cache_dir().rglob("*")
        )
        for path in make_store().options.resolved_cache_dir().rglob("*.json"):
            cache_text += path.read_text()
        assert "key-one" not in cache_text
        assert "key-two" not in cache_text


def test_new_revision_gets_a_new_entry(viking: VikingDouble, store: VikingSkillStore) -> None:
    first = store.materialize(DEMO_ROOT)
    viking.set_file(DEMO_ROOT, "scripts/run.sh", b"echo v2\n")
    second = store.materialize(DEMO_ROOT)
    assert first != second
    assert (second / "scripts/run.sh").read_bytes() == b"echo v2\n"
    assert (first / "scripts/run.sh").read_bytes() == b"#!/bin/sh\necho demo\n"
    assert len(store.cache_entries()) == 2


def test_prune_everything_and_forget(viking: VikingDouble, store: VikingSkillStore) -> None:
    uris = _add(viking, 3)
    for uri in uris:
        store.materialize(uri)
    assert store.forget(uris[0]) == 1
    assert len(store.cache_entries()) == 2
    assert store.prune(everything=True) == 2
    assert store.cache_entries() == []
    assert list((store.options.resolved_cache_dir() / "v1" / "entries").iterdir()) == []
