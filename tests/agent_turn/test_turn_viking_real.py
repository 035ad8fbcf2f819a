"""A scripted multi-turn run over a real ``openviking`` server (see ``viking_real``).

Turn 1 activates a remote skill (nothing downloaded), reads a reference from the server and
runs its script in the same batch as the activation (the script call is blocked with
``SKILL_CONTEXT_UPDATED`` and retried, which materializes the package); turn 2 runs it again
from the host cache after a new lease; after the skill is replaced on the server, turn 3 runs
the new revision. Canonical URIs of the skill resolve to its prepared files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.tools import SkillTools, ToolCall
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import discover_skill_sources, viking_skill_sources
from viking_real.openviking_harness import Identity, OpenVikingServer, downloads, shared_server

pytestmark = pytest.mark.timeout(1800)

IDENTITY = Identity(user="turn-user")
SEARCH_SECONDS = 30.0
SKILL_MD = """---
name: turn-real
description: Prints its revision word.
allowed-tools: Bash(sh *) Read
---

# Turn real

Run `sh scripts/word.sh`; notes are in references/notes.md.
"""


def _files(word: str) -> dict[str, str | bytes]:
    return {
        "SKILL.md": SKILL_MD,
        "scripts/word.sh": f"#!/bin/sh\necho word={word}\n".encode(),
        "references/notes.md": "# Notes\nplain notes\n",
    }


@pytest.fixture(scope="module")
def server() -> Iterator[OpenVikingServer]:
    for running in shared_server():
        running.upload_skill("turn-real", _files("first"), identity=IDENTITY)
        yield running


def test_turns_over_the_real_server(server: OpenVikingServer, tmp_path: Path) -> None:
    uri = server.skill_uri("turn-real", identity=IDENTITY)
    run = ToolCall("bash", {"command": "sh scripts/word.sh"}, "run")
    with (
        VikingSkillStore(
            server_url=server.url,
            account=IDENTITY.account,
            user=IDENTITY.user,
            cache_dir=tmp_path / "cache",
        ) as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [uri])) as tools,
    ):
        mark = server.proxy.mark()
        with tools.turn() as turn:
            first = turn.dispatch_batch([ToolCall("skill", {"command": "turn-real"}, "s"), run])
            assert first[1].code == "SKILL_CONTEXT_UPDATED"
            assert first[0].usage.skill_uri == uri
            assert downloads(server.proxy.since(mark)) == []  # remote first: SKILL.md only
            notes_first = turn.call(("read", {"file_path": "references/notes.md"}))
            assert "plain notes" in notes_first.content  # served from the server
            assert len(downloads(server.proxy.since(mark))) == 1
            assert "word=first" in turn.dispatch_batch([run])[0].content
            notes = turn.call(("read", {"file_path": f"{uri}/references/notes.md"}))
            assert "plain notes" in notes.content
            assert notes.usage.skill_uris == (uri,)
        fetched = len(downloads(server.proxy.since(mark)))
        assert fetched > 0

        mark = server.proxy.mark()
        with tools.turn() as turn:
            turn.dispatch("skill", {"command": "turn-real"})
            assert "word=first" in turn.dispatch_batch([run])[0].content
        seen = server.proxy.since(mark)
        assert seen, "the second turn read the manifest again"
        assert downloads(seen) == []  # same revision: served from the host cache

        server.upload_skill("turn-real", _files("second"), identity=IDENTITY, replace=True)
        with tools.turn() as turn:
            turn.dispatch("skill", {"command": "turn-real"})
            assert "word=second" in turn.dispatch_batch([run])[0].content
        assert len({entry.revision for entry in store.cache_entries()}) == 2


def test_a_skill_changed_on_the_server_after_activation_is_refused_then_read_again(
    server: OpenVikingServer, tmp_path: Path
) -> None:
    name = "turn-pinned"
    files = {**_files("first"), "SKILL.md": SKILL_MD.replace("turn-real", name)}
    server.upload_skill(name, files, identity=IDENTITY)
    uri = server.skill_uri(name, identity=IDENTITY)
    run = ToolCall("bash", {"command": "sh scripts/word.sh"}, "run")
    read = ToolCall("read", {"file_path": "references/notes.md"}, "read")
    with (
        VikingSkillStore(
            server_url=server.url,
            account=IDENTITY.account,
            user=IDENTITY.user,
            cache_dir=tmp_path / "cache",
        ) as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [uri])) as tools,
        tools.turn() as turn,
    ):
        assert not turn.call(("skill", {"command": name})).is_error  # revision one is read
        second = {**_files("second"), "SKILL.md": files["SKILL.md"]}
        server.upload_skill(name, second, identity=IDENTITY, replace=True)
        mark = server.proxy.mark()
        refused = turn.call(run)
        assert refused.code == "SKILL_REVISION_CHANGED"
        assert "word=" not in refused.content  # neither revision ran
        assert downloads(server.proxy.since(mark)) == []
        assert turn.active_skills == []
        mark = server.proxy.mark()
        assert not turn.call(("skill", {"command": name})).is_error
        assert server.proxy.since(mark), "the skill was read again"
        assert "word=second" in turn.call(run).content

    with (
        VikingSkillStore(
            server_url=server.url,
            account=IDENTITY.account,
            user=IDENTITY.user,
            cache_dir=tmp_path / "cache",
        ) as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [uri])) as tools,
        tools.turn() as turn,
    ):
        turn.call(("skill", {"command": name}))
        assert "plain notes" in turn.call(read).content
        changed = {**files, "references/notes.md": "# Notes\nchanged notes\n"}
        server.upload_skill(name, changed, identity=IDENTITY, replace=True)
        refused = turn.call(read)
        assert refused.code == "SKILL_REVISION_CHANGED"
        assert "changed notes" not in refused.content
        turn.call(("skill", {"command": name}))
        assert "changed notes" in turn.call(read).content


def test_discovery_by_query_on_the_real_server(server: OpenVikingServer, tmp_path: Path) -> None:
    with VikingSkillStore(
        server_url=server.url,
        account=IDENTITY.account,
        user=IDENTITY.user,
        cache_dir=tmp_path / "cache",
    ) as store:
        mark = server.proxy.mark()
        # The search's 2 s default (RFC §6.3) is the turn's budget, not what this test checks:
        # on a suite loading both cores the real server's search has taken longer.
        found = store.find_skills(
            "print the revision word", score_threshold=0.0, timeout_seconds=SEARCH_SECONDS
        )
        assert downloads(server.proxy.since(mark)) == []
        uri = server.skill_uri("turn-real", identity=IDENTITY)
        hit = next(summary for summary in found if summary.uri == uri)
        assert hit.name == "turn-real"
        assert hit.score is not None
        sources = discover_skill_sources(
            store, "print the revision word", score_threshold=0.0, timeout_seconds=SEARCH_SECONDS
        )
        assert uri in [source.location for source in sources]
