"""The Viking store against a real ``openviking`` server (0.5.2, offline, on 127.0.0.1).

Skills are added through the server's own API; requests from the store go through a counting
proxy, so "a cache hit downloads nothing" is checked by counting ``/api/v1/content/download``
requests the server actually received.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skillruntime.viking import VikingSkillStore, VikingStoreError
from viking_real.openviking_harness import Identity, OpenVikingServer, downloads

# The first run creates the server's virtual environment (minutes); later runs reuse it.
pytestmark = pytest.mark.timeout(1800)

SCRIPT = b"#!/bin/sh\necho hello from $1\n"
BLOB = bytes(range(256)) * 40

StoreFactory = Callable[..., VikingSkillStore]
DEFAULT_IDENTITY = Identity()


def _skill_md(name: str, description: str = "Greets people from a remote skill.") -> str:
    return (
        f"---\nname: {name}\ndescription: {description}\n---\n\n"
        f"# {name}\n\nRun `bash scripts/hello.sh NAME`.\n"
    )


def _files(name: str, **extra: str | bytes) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        "SKILL.md": _skill_md(name),
        "scripts/hello.sh": SCRIPT,
        "data/blob.bin": BLOB,
    }
    files.update(extra)
    return files


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def make_store(openviking_server: OpenVikingServer, tmp_path: Path) -> Iterator[StoreFactory]:
    """Build stores talking to the server through the counting proxy; all closed afterwards."""
    opened: list[VikingSkillStore] = []

    def make(
        identity: Identity = DEFAULT_IDENTITY, cache: str = "cache", **kwargs: Any
    ) -> VikingSkillStore:
        store = VikingSkillStore(
            server_url=openviking_server.url,
            account=identity.account,
            user=identity.user,
            cache_dir=tmp_path / cache,
            **kwargs,
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_a_pull_is_verified_and_cached_and_a_second_pull_downloads_nothing(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    server.upload_skill("real-pull", _files("real-pull"))
    uri = server.skill_uri("real-pull")
    expected = server.get_skill("real-pull")
    store = make_store()

    manifest = store.resolve(uri)
    assert manifest.root_uri == uri
    assert manifest.revision == expected["revision"]
    assert manifest.name == "real-pull"
    paths = {f.path for f in manifest.files}
    assert {"SKILL.md", "scripts/hello.sh", "data/blob.bin"} <= paths
    served = {f["path"]: f for f in expected["files"] if not f["is_dir"]}
    for file in manifest.files:
        assert (file.size, file.sha256) == (served[file.path]["size"], served[file.path]["sha256"])

    progress: list[tuple[int, int]] = []
    mark = server.proxy.mark()
    directory = store.materialize(uri, progress=lambda done, total: progress.append((done, total)))
    first = downloads(server.proxy.since(mark))
    assert len(first) >= 2  # at least the two auxiliary files came over the wire
    assert (directory / "scripts" / "hello.sh").read_bytes() == SCRIPT
    assert (directory / "data" / "blob.bin").read_bytes() == BLOB
    assert _sha((directory / "SKILL.md").read_bytes()) == expected["content_sha256"]
    assert progress
    assert progress[-1][0] == progress[-1][1] >= len(BLOB)

    entries = store.cache_entries()
    assert len(entries) == 1
    assert (entries[0].root_uri, entries[0].revision) == (uri, expected["revision"])

    mark = server.proxy.mark()
    with store.lease(uri) as again:
        assert Path(again) == Path(directory)
        assert (Path(again) / "data" / "blob.bin").read_bytes() == BLOB
    seen = server.proxy.since(mark)
    assert downloads(seen) == []
    # The hit still re-checked the manifest with the server before handing the copy out.
    assert any(r.path.startswith("/api/v1/skills/real-pull") for r in seen)
    assert len(store.cache_entries()) == 1


def test_editing_a_file_on_the_server_makes_the_next_pull_a_new_revision(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    server.upload_skill("real-edit", _files("real-edit"))
    uri = server.skill_uri("real-edit")
    store = make_store()
    before = store.resolve(uri)
    first = store.materialize(uri)
    assert (first / "scripts" / "hello.sh").read_bytes() == SCRIPT

    edited = b"#!/bin/sh\necho edited greeting for $1\n"
    server.stored_path("real-edit", "scripts/hello.sh").write_bytes(edited)

    mark = server.proxy.mark()
    second = store.materialize(uri)
    after = store.resolve(uri)
    assert after.revision != before.revision
    assert after.revision == server.get_skill("real-edit")["revision"]
    assert (second / "scripts" / "hello.sh").read_bytes() == edited
    assert Path(second) != Path(first)
    assert downloads(server.proxy.since(mark))
    revisions = {e.revision for e in store.cache_entries() if e.root_uri == uri}
    assert after.revision in revisions


def test_user_and_agent_scopes_never_share_a_cache_entry(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    files = _files("real-scoped")
    server.upload_skill("real-scoped", files, scope="user")
    server.upload_skill("real-scoped", files, scope="agent")
    user_uri = server.skill_uri("real-scoped", scope="user")
    agent_uri = server.skill_uri("real-scoped", scope="agent")
    store = make_store()

    user_dir = store.materialize(user_uri)
    mark = server.proxy.mark()
    agent_dir = store.materialize(agent_uri)
    assert downloads(server.proxy.since(mark)), "the agent-scope skill must be downloaded itself"
    assert Path(user_dir) != Path(agent_dir)
    assert (agent_dir / "data" / "blob.bin").read_bytes() == BLOB
    roots = sorted(e.root_uri for e in store.cache_entries())
    assert roots == sorted([user_uri, agent_uri])


def test_two_identities_never_share_a_cache_entry_even_for_identical_skills(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    # Same user name in two accounts: the server gives both the same root URI and, for
    # identical bytes, the same revision; only the identity tells them apart.
    alice = Identity(user="alice")
    alice_acme = Identity(account=f"{alice.account}-acme", user="alice")
    files = _files("real-ident")
    server.upload_skill("real-ident", files, identity=alice)
    server.upload_skill("real-ident", files, identity=alice_acme)
    uri = server.skill_uri("real-ident", identity=alice)
    assert uri == server.skill_uri("real-ident", identity=alice_acme)
    same = server.get_skill("real-ident", identity=alice)["revision"]
    assert same == server.get_skill("real-ident", identity=alice_acme)["revision"]

    first = make_store(alice, cache="shared-cache")
    second = make_store(alice_acme, cache="shared-cache")
    first_dir = first.materialize(uri)
    mark = server.proxy.mark()
    second_dir = second.materialize(uri)
    assert downloads(server.proxy.since(mark)), "another identity must not reuse the entry"
    assert Path(first_dir) != Path(second_dir)
    keys = {e.key for e in first.cache_entries()}
    assert len(keys) == 2
    assert {e.revision for e in first.cache_entries()} == {same}


def test_another_users_skill_is_refused(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    owner = Identity(user="owner")
    server.upload_skill("real-private", _files("real-private"), identity=owner)
    intruder = make_store(Identity(user="intruder"))
    with pytest.raises(VikingStoreError) as caught:
        intruder.materialize(server.skill_uri("real-private", identity=owner))
    assert caught.value.code in {"SKILL_NOT_FOUND", "SKILL_INVALID", "SKILL_ACCESS_DENIED"}
    assert intruder.cache_entries() == []


def test_a_missing_skill_is_skill_not_found(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    store = make_store()
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(openviking_server.skill_uri("real-does-not-exist"))
    assert caught.value.code == "SKILL_NOT_FOUND"


def test_two_agents_of_one_user_never_share_a_cache_entry(
    openviking_server: OpenVikingServer, make_store: StoreFactory
) -> None:
    server = openviking_server
    owner = Identity(user="agents-owner")
    server.upload_skill("real-agents", _files("real-agents"), identity=owner)
    uri = server.skill_uri("real-agents", identity=owner)
    first = make_store(owner, cache="agents-cache", agent="agent-one")
    second = make_store(owner, cache="agents-cache", agent="agent-two")
    first_dir = first.materialize(uri)
    mark = server.proxy.mark()
    second_dir = second.materialize(uri)
    seen = server.proxy.since(mark)
    assert downloads(seen), "another agent must not reuse the entry"
    assert {r.headers.get("X-OpenViking-Actor-Peer") for r in seen} == {"agent-two"}
    assert Path(first_dir) != Path(second_dir)
    assert len({e.key for e in first.cache_entries()}) == 2
