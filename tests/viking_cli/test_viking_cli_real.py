"""``skillruntime viking`` (pull, show, ls, cache ls/prune) against a real ``openviking`` server.

The commands are reached through ``build_cli()``, i.e. through the viking plugin's
``skillruntime_cli`` hook, exactly as the installed ``skillruntime`` command sees them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from skillruntime.core.cli import build_cli
from skillruntime.core.tools import TurnRecord, TurnToolCall
from skillruntime.viking import VikingSessionSink, VikingStoreOptions
from viking_real.openviking_harness import Identity, OpenVikingServer, downloads

pytestmark = pytest.mark.timeout(1800)

IDENTITY = Identity(user="cli-user")
SKILL_MD = """---
name: cli-skill
description: A skill pulled from the command line.
---

# CLI skill

Run `bash scripts/run.sh`.
"""
RUN_SH = b"#!/bin/sh\necho run\n"
BLOB = bytes(range(256)) * 64

Invoke = Callable[..., Result]


@pytest.fixture(scope="module")
def seeded(openviking_server: OpenVikingServer) -> OpenVikingServer:
    openviking_server.upload_skill(
        "cli-skill",
        {"SKILL.md": SKILL_MD, "scripts/run.sh": RUN_SH, "assets/blob.bin": BLOB},
        identity=IDENTITY,
    )
    return openviking_server


@pytest.fixture
def cli() -> click.Group:
    return build_cli()


@pytest.fixture
def invoke(
    seeded: OpenVikingServer, cli: click.Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Invoke:
    """Run ``skillruntime viking ARGS`` with the connection given through the environment."""
    for name in ("API_KEY", "ACCOUNT", "AGENT"):
        monkeypatch.delenv(f"SKILLRUNTIME_VIKING_{name}", raising=False)
    env = {
        "SKILLRUNTIME_VIKING_SERVER_URL": seeded.url,
        "SKILLRUNTIME_VIKING_ACCOUNT": IDENTITY.account,
        "SKILLRUNTIME_VIKING_USER": IDENTITY.user,
        "SKILLRUNTIME_VIKING_CACHE_DIR": str(tmp_path / "cache"),
    }

    def run(
        *args: str, input: str | None = None, extra_env: dict[str, str] | None = None
    ) -> Result:
        return CliRunner().invoke(
            cli, ["viking", *args], env={**env, **(extra_env or {})}, input=input
        )

    return run


def _uri(server: OpenVikingServer) -> str:
    return server.skill_uri("cli-skill", identity=IDENTITY)


def test_the_viking_group_is_added_by_the_plugin(cli: click.Group) -> None:
    result = CliRunner().invoke(cli, ["viking", "--help"])
    assert result.exit_code == 0, result.output
    for command in ("pull", "show", "ls", "cache"):
        assert command in result.output


def test_pull_downloads_with_a_progress_bar_then_hits_the_cache(
    seeded: OpenVikingServer, invoke: Invoke, tmp_path: Path
) -> None:
    uri = _uri(seeded)
    mark = seeded.proxy.mark()
    first = invoke("pull", uri)
    assert first.exit_code == 0, first.output
    directory = Path(first.stdout.strip())
    assert (directory / "SKILL.md").is_file()
    assert (directory / "assets" / "blob.bin").read_bytes() == BLOB
    assert f"Downloading {uri}" in first.stderr
    assert downloads(seeded.proxy.since(mark))

    mark = seeded.proxy.mark()
    second = invoke("pull", uri)
    assert second.exit_code == 0, second.output
    assert Path(second.stdout.strip()) == directory
    assert downloads(seeded.proxy.since(mark)) == []
    assert "Downloading" not in second.stderr  # a hit draws no progress bar


def test_pull_dest_copies_the_verified_skill(
    seeded: OpenVikingServer, invoke: Invoke, tmp_path: Path
) -> None:
    dest = tmp_path / "out" / "cli-skill"
    result = invoke("pull", _uri(seeded), "--dest", str(dest))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(dest)
    assert (dest / "scripts" / "run.sh").read_bytes() == RUN_SH
    assert (dest / "assets" / "blob.bin").read_bytes() == BLOB
    assert "SKILL.md" in {p.name for p in dest.iterdir()}

    again = invoke("pull", _uri(seeded), "--dest", str(dest))
    assert again.exit_code == 2
    assert "already exists" in again.stderr


def test_show_prints_revision_files_and_sizes(seeded: OpenVikingServer, invoke: Invoke) -> None:
    expected = seeded.get_skill("cli-skill", identity=IDENTITY)
    result = invoke("show", _uri(seeded))
    assert result.exit_code == 0, result.output
    assert expected["revision"] in result.stdout
    assert "assets/blob.bin" in result.stdout
    assert "16.0 KiB" in result.stdout  # the blob's size

    as_json = invoke("show", _uri(seeded), "--json")
    assert as_json.exit_code == 0, as_json.output
    shown = json.loads(as_json.stdout)
    assert shown["revision"] == expected["revision"]
    sizes = {f["path"]: f["size"] for f in shown["files"]}
    assert sizes["assets/blob.bin"] == len(BLOB)
    assert sizes["scripts/run.sh"] == len(RUN_SH)


def test_ls_lists_the_identity_s_skills(seeded: OpenVikingServer, invoke: Invoke) -> None:
    result = invoke("ls", f"viking://user/{IDENTITY.user}/skills", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {"name": "cli-skill", "uri": _uri(seeded)} in [
        {"name": r["name"], "uri": r["uri"]} for r in rows
    ]


def test_cache_ls_and_prune(seeded: OpenVikingServer, invoke: Invoke) -> None:
    empty = invoke("cache", "ls")
    assert empty.exit_code == 0, empty.output
    assert "empty" in empty.stdout

    assert invoke("pull", _uri(seeded)).exit_code == 0
    listed = invoke("cache", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    (entry,) = json.loads(listed.stdout)
    assert entry["root_uri"] == _uri(seeded)
    assert entry["revision"] == seeded.get_skill("cli-skill", identity=IDENTITY)["revision"]
    assert entry["leased"] is False
    assert entry["size"] >= len(BLOB)

    kept = invoke("cache", "prune")
    assert kept.exit_code == 0, kept.output
    assert "removed 0 cache entries" in kept.stdout
    pruned = invoke("cache", "prune", "--all")
    assert pruned.exit_code == 0, pruned.output
    assert "removed 1 cache entry" in pruned.stdout
    assert "empty" in invoke("cache", "ls").stdout


def test_errors_are_one_line_with_the_stable_code(seeded: OpenVikingServer, invoke: Invoke) -> None:
    missing = invoke("show", seeded.skill_uri("cli-nope", identity=IDENTITY))
    assert missing.exit_code == 1
    assert missing.stderr.startswith("Error: [SKILL_NOT_FOUND]")
    assert "Traceback" not in missing.output

    bad_uri = invoke("pull", "viking://nowhere/x")
    assert bad_uri.exit_code == 1
    assert bad_uri.stderr.startswith("Error: [SKILL_INVALID]")

    bad_url = invoke("show", _uri(seeded), extra_env={"SKILLRUNTIME_VIKING_SERVER_URL": "ftp://x"})
    assert bad_url.exit_code == 2
    assert "server_url" in bad_url.stderr
    assert "ftp://x" not in bad_url.output


def test_the_api_key_is_prompted_hidden_and_never_printed(
    seeded: OpenVikingServer, invoke: Invoke
) -> None:
    secret = "sk-test-do-not-print-4242"
    mark = seeded.proxy.mark()
    result = invoke("--ask-api-key", "show", _uri(seeded), input=secret + "\n")
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    assert secret not in result.stderr
    sent = [r for r in seeded.proxy.since(mark) if r.path.startswith("/api/v1/skills/")]
    assert sent
    assert all(r.headers.get("X-API-Key") == secret for r in sent)


def test_an_api_key_from_the_environment_is_sent_and_not_printed(
    seeded: OpenVikingServer, invoke: Invoke
) -> None:
    secret = "sk-env-do-not-print-1717"
    mark = seeded.proxy.mark()
    result = invoke(
        "show",
        seeded.skill_uri("cli-nope", identity=IDENTITY),
        extra_env={"SKILLRUNTIME_VIKING_API_KEY": secret},
    )
    assert result.exit_code == 1
    assert secret not in result.output
    assert secret not in result.stderr
    sent = [r for r in seeded.proxy.since(mark) if r.path.startswith("/api/v1/skills/")]
    assert sent
    assert all(r.headers.get("X-API-Key") == secret for r in sent)


def test_session_show_and_commit_on_the_real_server(
    seeded: OpenVikingServer, invoke: Invoke
) -> None:
    """A turn stored by the session sink, shown and committed from the command line."""
    session_id = f"cli-session-{uuid.uuid4().hex[:12]}"
    uri = _uri(seeded)
    options = VikingStoreOptions(
        server_url=seeded.url, account=IDENTITY.account, user=IDENTITY.user
    )
    call = TurnToolCall("c1", "skill", "ok", skills=(uri,), arguments={"command": "cli-skill"})
    with VikingSessionSink(options, session_id) as sink:
        assert sink.record_turn(TurnRecord("cli-turn", "Run it", "It ran.", (call,))).written
    shown = invoke("session", "show", session_id)
    assert shown.exit_code == 0, shown.output
    assert "  user  turn cli-turn" in shown.output
    assert f"    tool skill [completed] {uri}" in shown.output
    data = json.loads(invoke("session", "show", session_id, "--json").output)
    assert data["session"]["session_id"] == session_id
    assert [m["turn_id"] for m in data["messages"]] == ["cli-turn", "cli-turn"]
    committed = invoke("session", "commit", session_id, "--json")
    assert committed.exit_code == 0, committed.output
    answer = json.loads(committed.output)
    assert answer["archived"] is True
    assert answer["task_id"]
    missing = invoke("session", "commit", f"{session_id}-missing")
    assert missing.exit_code == 1
    assert "Error: [SESSION_NOT_FOUND] " in missing.output
