"""A scripted multi-turn run over a real ``openviking`` server (see ``viking_real``).

Turn 1 activates a remote skill (nothing downloaded), reads a reference from the server and
runs its script in the same batch as the activation (the script call is blocked with
``SKILL_CONTEXT_UPDATED`` and retried, which materializes the package); turn 2 runs it again
from the host cache after a new lease; after the skill is replaced on the server, turn 3 runs
the new revision. Canonical URIs of the skill resolve to its prepared files. A turn's record is
stored in a real session and committed (seed 000 §2.2).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from agent_turn.helpers import MakeSkill
from skillruntime.core.tools import SessionOutcome, SkillTools, ToolCall, TurnRecord
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore, VikingStoreOptions
from skillruntime.viking.session_sink import CommitPolicy, VikingSessionSink
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


def _task_status(server: OpenVikingServer, task_id: str) -> str:
    """The status of a background task once it ended (polled for at most 120 s)."""
    deadline = time.monotonic() + 120
    status = ""
    while time.monotonic() < deadline:
        response = requests.get(
            f"{server.direct_url}/api/v1/tasks/{task_id}", headers=IDENTITY.headers(), timeout=10
        )
        status = str(response.json()["result"]["status"])
        if status in ("completed", "failed", "cancelled"):
            return status
        time.sleep(0.5)
    return status


def test_a_turn_is_stored_in_a_session_and_committed(
    server: OpenVikingServer, tmp_path: Path
) -> None:
    """Seed §2.2 end to end: the turn writes its record to a real session (one user message,
    one assistant message with a tool part per call and the skill's URI), a retry adds
    nothing, no skill body reaches the session's files, and a commit archives it and runs the
    memory extraction."""
    name = "turn-session"
    marker = "SESSION-BODY-MARKER-0d2c"
    files = {
        "SKILL.md": SKILL_MD.replace("turn-real", name).replace("# Turn real", f"# {marker}"),
        "scripts/word.sh": b"#!/bin/sh\necho word=stored\n",
        "references/notes.md": f"# Notes\n{marker}-notes\n",
    }
    server.upload_skill(name, files, identity=IDENTITY)
    uri = server.skill_uri(name, identity=IDENTITY)
    session_id = f"turn-session-{uuid.uuid4().hex[:12]}"
    options = VikingStoreOptions(
        server_url=server.url, account=IDENTITY.account, user=IDENTITY.user
    )
    with (
        VikingSkillStore(
            server_url=server.url,
            account=IDENTITY.account,
            user=IDENTITY.user,
            cache_dir=tmp_path / "cache",
        ) as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [uri])) as tools,
        VikingSessionSink(options, session_id) as sink,
    ):
        with tools.turn("turn-one") as turn:
            turn.dispatch("skill", {"command": name}, call_id="a")
            assert "word=stored" in turn.dispatch(
                "bash", {"command": "sh scripts/word.sh"}, call_id="b"
            )
            assert marker in turn.dispatch(
                "read", {"file_path": "references/notes.md"}, call_id="c"
            )
            outcome = turn.record_session(sink, user_message="Say the word", answer="stored")
        assert outcome.written, outcome
        assert outcome.ok, outcome
        with VikingSessionSink(options, session_id) as retry:  # another process retrying
            assert retry.record_turn(turn.record(user_message="x", answer="y")).duplicate

        stored = sink.client.messages(session_id)
        assert [(m["role"], m.get("turn_id")) for m in stored] == [
            ("user", "turn-one"),
            ("assistant", "turn-one"),
        ]
        tool_parts = [part for part in stored[1]["parts"] if part.get("type") == "tool"]
        assert [part["tool_id"] for part in tool_parts] == ["a", "b", "c"]
        assert all(part["skill_uri"].endswith(f"/skills/{name}") for part in tool_parts)
        assert marker not in json.dumps(stored)
        session_files = [
            path
            for path in server.workspace.rglob("*")
            if path.is_file() and session_id in path.as_posix()
        ]
        assert session_files, "the server keeps the session on disk"
        for path in session_files:
            assert marker.encode() not in path.read_bytes(), path

        committing = VikingSessionSink(options, session_id, commit=CommitPolicy.every_turn())
        with committing:
            committed = committing.record_turn(TurnRecord("turn-two", "Again?", "stored again"))
            assert committed.committed, committed
            answer = committing.last_commit
            assert answer is not None
            assert answer["archived"] is True
            assert answer["task_id"], "the commit started the memory extraction"
            assert _task_status(server, answer["task_id"]) == "completed"
            # Once extracted, the archive's messages leave the session's context.
            assert committing.client.messages(session_id) == []
            details = committing.client.get_session(session_id)
    assert details["session_id"] == session_id


def test_a_local_skill_is_named_in_the_session_without_a_refusal(
    server: OpenVikingServer, tmp_path: Path, make_skill: MakeSkill
) -> None:
    """The real server accepts only a ``viking://`` URI (or nothing) as a tool part's
    ``skill_uri`` (``400 INVALID_URI`` for a bare name or another scheme) and drops part fields
    it does not know, so a local skill's call is stored with ``skill_uri: ""`` and the skill's
    name in its ``tool_output`` status line; the remote skill's calls keep its URI. Recorded
    from asyncio (``arecord_session``: the sync sink in a worker thread)."""
    name = "turn-mixed"
    files = {**_files("mixed"), "SKILL.md": SKILL_MD.replace("turn-real", name)}
    server.upload_skill(name, files, identity=IDENTITY)
    uri = server.skill_uri(name, identity=IDENTITY)
    local = make_skill("local-notes", body="LOCAL-BODY-MARKER-77e1: notes.\n")
    session_id = f"turn-mixed-{uuid.uuid4().hex[:12]}"
    options = VikingStoreOptions(
        server_url=server.url, account=IDENTITY.account, user=IDENTITY.user
    )

    async def turn_async(tools: SkillTools, sink: VikingSessionSink) -> SessionOutcome:
        with tools.turn("mixed-one") as turn:
            await turn.adispatch_batch([ToolCall("skill", {"command": name}, "r1")])
            await turn.adispatch_batch([ToolCall("skill", {"command": "local-notes"}, "l1")])
            return await turn.arecord_session(
                sink, user_message="Use both skills", answer="done", timeout_seconds=60
            )

    with (
        VikingSkillStore(
            server_url=server.url,
            account=IDENTITY.account,
            user=IDENTITY.user,
            cache_dir=tmp_path / "cache",
        ) as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, [*viking_skill_sources(store, [uri]), local]) as tools,
        VikingSessionSink(options, session_id) as sink,
    ):
        outcome = asyncio.run(turn_async(tools, sink))
        assert outcome.written, outcome
        assert outcome.ok, outcome
        stored = sink.client.messages(session_id)
    parts = [part for part in stored[1]["parts"] if part.get("type") == "tool"]
    assert [(part["tool_id"], part["skill_uri"]) for part in parts] == [("r1", uri), ("l1", "")]
    assert "local skill local-notes" in parts[1]["tool_output"]
    assert "LOCAL-BODY-MARKER-77e1" not in json.dumps(stored)
