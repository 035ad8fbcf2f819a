"""The Docker runtime on the real engine: resuming a conversation, replacing a vanished container,
isolation defaults, hostile paths and archives, resource limits, sweeps, orphans, leases — and
nothing left behind."""

from __future__ import annotations

import importlib
import io
import json
import logging
import tarfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import pytest
from click.testing import CliRunner
from sqlalchemy import update

import docker_fixtures
from docker_fixtures import IMAGE, engine_client, labelled, suite_labels
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import sweep_conversations
from skillruntime.core.errors import (
    NotRegularFileError,
    RuntimePermissionError,
    WorkspaceEscapeError,
)
from skillruntime.core.models import SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME
from skillruntime.core.plugins.registry import create_runtime, listing_drift
from skillruntime.core.skills import load_skill
from skillruntime.core.testing import SkillFactory
from skillruntime.docker import (
    ContainerReplacedError,
    DockerReaper,
    DockerRuntimeOptions,
    DockerSkillRuntime,
)
from skillruntime.docker.archive import ArchiveMemberError, MemberReader, checked_member
from skillruntime.docker.commands import CommandNotStartedError

OLD = datetime(2020, 1, 1, tzinfo=UTC)

docker_run = docker_fixtures.docker_run


def _runtime(
    run: str, store: ConversationStore | None, conversation: str | None, **extra: Any
) -> DockerSkillRuntime:
    options: dict[str, Any] = {"image": IMAGE, "labels": suite_labels(run), **extra}
    if conversation is not None:
        options.update(conversation_id=conversation, conversation_store=store)
    return DockerSkillRuntime(**options)


def _run(runtime: DockerSkillRuntime, command: str, **extra: Any) -> Any:
    return runtime.execute(SkillExecutionRequest(command=command, **extra))


@pytest.fixture
def sql_store(tmp_path: Path) -> Iterator[SqlConversationStore]:
    with SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True) as store:
        yield store


# ------------------------------------------------------------------ conversations


def test_a_second_runtime_object_resumes_files_and_prepared_skills(
    docker_run: str, sql_store: SqlConversationStore, tmp_path: Path
) -> None:
    skill = SkillFactory(tmp_path).create("resumed")
    with _runtime(docker_run, sql_store, "resume-1") as first:
        (prepared,) = first.prepare(SkillPreparationRequest(skills=(skill,)))
        first.get_file_system().write_text("notes/a.txt", "kept")
        container = first.container_id
    assert labelled(docker_run)[0] == [container]  # close keeps the conversation's container
    with _runtime(docker_run, sql_store, "resume-1") as second:
        puts: list[str] = []
        original = second.engine.put_archive

        def counting(container_id: str, path: str, data: Any) -> None:
            puts.append(path)
            original(container_id, path, data)

        second.engine.put_archive = counting  # type: ignore[method-assign]
        (again,) = second.prepare(SkillPreparationRequest(skills=(skill,)))
        assert again.base_path == prepared.base_path
        assert second.get_file_system().read_text("notes/a.txt") == "kept"
        assert second.container_id == container
        assert puts == []  # nothing uploaded again
        record = second.conversation_record
        assert record is not None
        assert record.sandbox_id == container
        second.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_vanished_container_is_replaced_on_the_same_volume_and_recorded(
    docker_run: str, sql_store: SqlConversationStore, tmp_path: Path
) -> None:
    skill = SkillFactory(tmp_path).create("replaced")
    with _runtime(docker_run, sql_store, "vanish-1") as runtime:
        (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        _run(runtime, "echo survived > file.txt")
        old = runtime.container_id
        assert old is not None
        client = engine_client()
        try:
            client.containers.get(old).remove(force=True)
        finally:
            client.close()
        result = _run(runtime, "cat file.txt")  # the exec could not start: sent to the new one
        assert result.stdout == "survived\n"
        new = runtime.container_id
        assert new not in {None, old}
        record = runtime.conversation_record
        assert record is not None
        assert record.sandbox_id == new
        # The copy is bootstrapped again in the new container (its marker named the old one).
        (again,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        assert again.base_path == prepared.base_path
    with _runtime(docker_run, sql_store, "vanish-1") as other:
        assert _run(other, "cat file.txt").stdout == "survived\n"
        assert other.container_id == new
        other.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_candidate_no_record_names_is_removed_on_attach(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    with _runtime(docker_run, sql_store, "orphan-1") as first:
        _run(first, "true")
        orphan = first.container_id
        key = first.conversation_record
        assert key is not None
    # A process that died between creating its container and recording it.
    assert sql_store.delete(key.storage_key) is not None
    with _runtime(docker_run, sql_store, "orphan-1", orphan_grace_seconds=0) as second:
        _run(second, "true")
        assert second.container_id != orphan
        assert labelled(docker_run)[0] == [second.container_id]
        second.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_destroy_removes_a_candidate_no_record_names_within_the_grace(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    # Found by the chaos benchmark (tests/benchmarks/bench_chaos.py): a node killed between
    # creating its candidate and recording it leaves a container on the conversation's volume;
    # destroying the conversation within the orphan grace failed on "volume is in use" after
    # deleting the record, leaving the container and the volume behind.
    with _runtime(docker_run, sql_store, "orphan-2") as first:
        _run(first, "true")
        orphan = first.container_id
        key = first.conversation_record
        assert key is not None
    assert sql_store.delete(key.storage_key) is not None
    with _runtime(docker_run, sql_store, "orphan-2") as second:  # default grace: kept
        _run(second, "true")
        assert sorted(labelled(docker_run)[0]) == sorted([orphan, second.container_id])
        second.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_private_container_is_removed_at_close(docker_run: str) -> None:
    with _runtime(docker_run, None, None) as runtime:
        assert _run(runtime, "pwd").stdout == "/workspace/skills\n"
        assert len(labelled(docker_run)[0]) == 1
    assert labelled(docker_run) == ([], [])


def test_the_plugin_builds_the_runtime_from_options(docker_run: str) -> None:
    runtime = create_runtime("docker", image=IMAGE, labels=suite_labels(docker_run))
    with runtime:
        assert isinstance(runtime, DockerSkillRuntime)
        assert _run(runtime, "echo ok").stdout == "ok\n"
    assert labelled(docker_run) == ([], [])


# ------------------------------------------------------------------ isolation


def test_containers_run_confined_by_default(docker_run: str) -> None:
    with _runtime(docker_run, None, None) as runtime:
        status = _run(runtime, "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").stdout
        assert status.split() == ["1000", "CapEff:", "0000000000000000", "NoNewPrivs:", "1"]
        assert _run(runtime, "ls /sys/class/net").stdout.split() == ["lo"]
        client = engine_client()
        try:
            config = client.api.inspect_container(runtime.container_id)["HostConfig"]
        finally:
            client.close()
        assert config["Privileged"] is False
        assert config["NetworkMode"] == "none"
        assert config["CapDrop"] == ["ALL"]
        assert config["PidsLimit"] == 256
        assert config["Memory"] == 1024**3
        assert config["NanoCpus"] == 10**9
        assert not any("docker.sock" in bind for bind in config.get("Binds") or [])


def test_a_command_cannot_reach_the_network(docker_run: str) -> None:
    with _runtime(docker_run, None, None) as runtime:
        for address in ("172.17.0.1/2375", "1.1.1.1/53", "10.0.0.1/80"):
            result = _run(runtime, f"echo > /dev/tcp/{address}", timeout_seconds=20)
            assert result.exit_code != 0
            assert not result.timed_out
            assert "Network is unreachable" in result.stderr


@pytest.mark.parametrize(
    "bind",
    [
        "/var/run/docker.sock:/var/run/docker.sock",
        "/var/run:/host",
        "/:/host",
        "/tmp/dk/docker.sock:/d",
    ],
)
def test_binding_the_engine_socket_is_refused_before_anything_is_created(
    docker_run: str, bind: str
) -> None:
    with pytest.raises(ValueError, match=r"engine socket|refusing"):
        _runtime(docker_run, None, None, binds=[bind])
    with pytest.raises(ValueError, match=r"engine socket|refusing"):
        DockerRuntimeOptions(binds=(bind,))
    assert labelled(docker_run) == ([], [])


def test_the_process_limit_gives_a_result_not_a_hang(docker_run: str) -> None:
    with _runtime(docker_run, None, None, pids_limit=24) as runtime:
        result = _run(
            runtime,
            "sh -c 'for i in $(seq 60); do sleep 3 >/dev/null 2>&1 & done; wait'; echo done",
            timeout_seconds=30,
        )
        assert not result.timed_out
        assert result.stdout == "done\n"
        assert "fork" in result.stderr  # busybox: "can't fork: Resource temporarily unavailable"
        # The engine gives the container's process slots back a moment after the processes end
        # (on a loaded host, later): until then an exec cannot start, and says so as a typed
        # error, never as output or a hang.
        deadline = time.monotonic() + 20.0
        refused: str | None = None
        while True:
            try:
                alive = _run(runtime, "echo alive")
                break
            except CommandNotStartedError as exc:
                refused = str(exc)
                assert time.monotonic() < deadline, refused
                time.sleep(0.2)
        assert alive.stdout == "alive\n"
        assert refused is None or "could not start the command" in refused


def test_the_memory_limit_gives_a_result_not_a_hang(docker_run: str) -> None:
    with _runtime(docker_run, None, None, memory="48m") as runtime:
        try:
            result = _run(
                runtime,
                "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}",
                timeout_seconds=60,
            )
        except ContainerReplacedError:
            pass  # the OOM killer took the container's first process too: the container ended
        else:
            assert not result.timed_out
            assert result.exit_code != 0  # killed by the kernel's OOM killer (137) or a failed fork
        assert _run(runtime, "echo alive").stdout == "alive\n"  # on the same or a new container


# ------------------------------------------------------------------ hostile paths and archives


def test_a_symbolic_link_out_of_the_workspace_is_not_followed(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    with _runtime(docker_run, sql_store, "links-1") as runtime:
        _run(
            runtime, "ln -s /etc/passwd leak; ln -s /etc etc; mkdir in; echo x > in/f; ln -s in ok"
        )
        fs = runtime.get_file_system()
        with pytest.raises(WorkspaceEscapeError):
            fs.read_text("leak")
        with pytest.raises(WorkspaceEscapeError):
            fs.read_text("etc/passwd")
        with pytest.raises(WorkspaceEscapeError):
            fs.write_text("etc/evil", "no")
        assert fs.read_text("ok/f") == "x\n"  # a link that stays inside is followed
        assert _run(runtime, "test -e /etc/evil && echo yes || echo no").stdout == "no\n"
        runtime.destroy_conversation()


def test_a_fifo_is_not_read(docker_run: str, sql_store: SqlConversationStore) -> None:
    with _runtime(docker_run, sql_store, "fifo-1") as runtime:
        _run(runtime, "mkfifo pipe")
        with pytest.raises(NotRegularFileError):
            runtime.get_file_system().read_bytes("pipe")
        runtime.destroy_conversation()


def _archive(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(member, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, **fields: Any) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = kind
    for key, value in fields.items():
        setattr(member, key, value)
    return member


@pytest.mark.parametrize(
    "member",
    [
        _member("../escape.txt", size=1),
        _member("a/../../escape.txt", size=1),
        _member("/etc/passwd", size=1),
        _member("link", tarfile.SYMTYPE, linkname="/etc/passwd"),
        _member("hard", tarfile.LNKTYPE, linkname="etc/passwd"),
        _member("dev", tarfile.CHRTYPE, devmajor=1, devminor=3),
        _member("blk", tarfile.BLKTYPE, devmajor=8, devminor=0),
        _member("fifo", tarfile.FIFOTYPE),
    ],
    ids=[
        "dotdot",
        "nested-dotdot",
        "absolute",
        "symlink",
        "hardlink",
        "chardev",
        "blockdev",
        "fifo",
    ],
)
def test_archive_members_that_leave_or_are_not_plain_are_refused(member: tarfile.TarInfo) -> None:
    raw = _archive(member, b"x" if member.isreg() else b"")
    with pytest.raises(ArchiveMemberError):
        checked_member(member)
    reader = MemberReader(iter([raw[:100], raw[100:]]))
    with pytest.raises(ArchiveMemberError):
        reader.first()
    reader.close()


def test_the_engine_archive_of_a_file_reads_as_its_bytes(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    data = bytes(range(256)) * 1000
    with _runtime(docker_run, sql_store, "bytes-1") as runtime:
        fs = runtime.get_file_system()
        fs.write_bytes("b.bin", data)
        assert fs.read_bytes("b.bin", max_bytes=len(data)) == data
        assert _run(runtime, "stat -c '%u %s' b.bin").stdout == f"1000 {len(data)}\n"
        runtime.destroy_conversation()


def test_preparing_a_skill_of_many_files_takes_one_archive(docker_run: str, tmp_path: Path) -> None:
    root = tmp_path / "many"
    (root / "files").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: many\ndescription: many files\n---\nbody\n")
    for index in range(300):
        (root / "files" / f"f{index:03d}.txt").write_text(f"{index}\n")
    with _runtime(docker_run, None, None) as runtime:
        puts: list[str] = []
        original = runtime.engine.put_archive

        def counting(container_id: str, path: str, data: Any) -> None:
            puts.append(path)
            original(container_id, path, data)

        runtime.engine.put_archive = counting  # type: ignore[method-assign]
        _run(runtime, "true")
        puts.clear()
        (skill,) = runtime.prepare(SkillPreparationRequest(skills=(load_skill(root),)))
        assert _run(runtime, f"ls {skill.base_path}/files | wc -l").stdout.strip() == "300"
        # Without a conversation the copy and its ready marker are one tar stream extracted by
        # the container's user (one exec): the engine, which writes as root, writes nothing.
        assert puts == []


class _Requests:
    """HTTP requests sent by every ``docker.APIClient`` of the process while counting (the
    benchmark's counter)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = docker.APIClient.send

        def send(client: Any, request: Any, **options: Any) -> Any:
            self.count += 1
            return original(client, request, **options)

        monkeypatch.setattr(docker.APIClient, "send", send)


def _many_files_skill(root: Path, count: int) -> Path:
    (root / "files" / "deep").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: many\ndescription: many files\n---\nbody\n")
    for index in range(count):
        (root / "files" / f"f{index:04d}.txt").write_text(f"{index}\n")
    (root / "files" / "deep" / "run.sh").write_text("#!/bin/sh\necho deep\n")
    (root / "files" / "deep" / "run.sh").chmod(0o755)
    return root


@pytest.mark.parametrize(
    ("conversation", "most"), [(None, 3), ("count-1", 7)], ids=["private", "conversation"]
)
def test_preparing_a_skill_of_1000_files_takes_a_few_engine_requests(
    docker_run: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    conversation: str | None,
    most: int,
) -> None:
    """Private: the ready check, and one exec (create, start) of ``tar -x`` as the user that
    also writes the ready marker. Conversation: the ready check, the archive into the staging
    directory, the ``PUT`` handing it to the user and one exec moving it into place (and the
    marker), after the staging path's check (one exec, once a container and process)."""
    skill = load_skill(_many_files_skill(tmp_path / "many", 1000))
    with _runtime(docker_run, None, conversation) as runtime:
        _run(runtime, "true")  # the container runs
        requests = _Requests(monkeypatch)
        (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        assert requests.count <= most
        listed = _run(
            runtime,
            f"ls {prepared.base_path}/files | wc -l; {prepared.base_path}/files/deep/run.sh",
        )
        assert listed.stdout == "1001\ndeep\n"
        owner = _run(runtime, f"stat -c %u {prepared.base_path}/files/f0001.txt")
        assert owner.stdout == "1000\n"
        if conversation is not None:
            runtime.destroy_conversation()


def test_a_prepare_replaces_links_planted_in_the_workspace_and_in_an_old_copy(
    docker_run: str, sql_store: SqlConversationStore, tmp_path: Path
) -> None:
    skill = load_skill(_many_files_skill(tmp_path / "many", 3))
    with _runtime(docker_run, sql_store, "plant-1") as runtime:
        # A link where the skills directory goes must not carry the copy out of the workspace.
        _run(runtime, "mkdir -p /tmp/out && rm -rf skills && ln -s /tmp/out skills")
        (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        assert _run(runtime, "ls -A /tmp/out | wc -l; test -L skills || echo real").stdout == (
            "0\nreal\n"
        )
        base = prepared.base_path
        # An old copy whose file became a link and whose marker is gone is placed again
        # without writing through the link.
        _run(runtime, f"rm {base}/../.*.ready; ln -sf /etc/hostname {base}/files/f0001.txt")
    with _runtime(docker_run, sql_store, "plant-1") as runtime:
        before = _run(runtime, "cat /etc/hostname").stdout
        (again,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        assert again.base_path == base
        checked = _run(runtime, f"test -L {base}/files/f0001.txt || cat {base}/files/f0001.txt")
        assert checked.stdout == "1\n"
        assert _run(runtime, "cat /etc/hostname").stdout == before
        runtime.destroy_conversation()


def test_a_prepare_without_a_conversation_replaces_a_link_put_in_place_of_remote_root(
    docker_run: str, tmp_path: Path
) -> None:
    skill = load_skill(_many_files_skill(tmp_path / "many", 3))
    with _runtime(docker_run, None, None, remote_root="/tmp/srt-remote") as runtime:
        _run(
            runtime,
            "mkdir /tmp/elsewhere && rm -rf /tmp/srt-remote"
            " && ln -s /tmp/elsewhere /tmp/srt-remote",
        )
        (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        assert prepared.base_path.startswith("/tmp/srt-remote/")
        found = _run(runtime, "ls -A /tmp/elsewhere | wc -l; test -L /tmp/srt-remote || echo real")
        assert found.stdout == "0\nreal\n"
        fs = runtime.get_file_system()
        _run(runtime, "mkdir -p /tmp/srt-remote/a && ln -s / /tmp/srt-remote/a/top")
        with pytest.raises(RuntimePermissionError):  # root's /etc reached through a link
            fs.write_text("/tmp/srt-remote/a/top/etc/skillruntime-denied", "no")
        fs.write_text("/tmp/srt-remote/a/mine.txt", "yes")
        assert _run(runtime, "cat a/mine.txt; ls /etc | grep -c skillruntime").stdout == "yes0\n"


def test_the_cold_first_command_of_a_conversation_takes_seven_engine_requests(
    docker_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _runtime(docker_run, None, "warm-1") as warm:
        _run(warm, "true")  # the API version and the image's user are known in the process
        with _runtime(docker_run, None, "cold-1") as cold:
            requests = _Requests(monkeypatch)
            assert _run(cold, "true").exit_code == 0
            # volume, create, start, the workspace's archive, and the exec's three requests
            assert requests.count <= 7
            monkeypatch.undo()
            assert _run(cold, "test -d . && test -w . && stat -c %u .").stdout == "1000\n"
            cold.destroy_conversation()
        warm.destroy_conversation()


def test_file_writes_honour_the_container_users_permissions(docker_run: str) -> None:
    with _runtime(docker_run, None, None) as runtime:
        fs = runtime.get_file_system()
        _run(runtime, "mkdir -p /tmp/mine /tmp/locked && chmod 0555 /tmp/locked")
        with pytest.raises(RuntimePermissionError):
            fs.write_text("/etc/skillruntime-denied", "no")  # root's 0755: the owner is read
        with pytest.raises(RuntimePermissionError):
            fs.write_text("/tmp/locked/f", "no")  # no write bit at all
        with pytest.raises(RuntimePermissionError):
            fs.write_bytes("/tmp/locked/g", b"x", executable=True)
        fs.write_text("/tmp/shared", "yes")  # 1777
        fs.write_text("/tmp/mine/f", "yes")  # the user's own 0755 directory, outside its tree
        assert _run(
            runtime, "cat /tmp/shared /tmp/mine/f; test -e /etc/skillruntime-denied || echo none"
        ).stdout == ("yesyesnone\n")


# ------------------------------------------------------------------ sweeps and leases


def test_a_sweep_removes_idle_containers_and_volumes_and_orphans_by_label(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    keys = {}
    for conversation in ("idle", "active", "orphaned"):
        with _runtime(docker_run, sql_store, f"sweep-{conversation}") as runtime:
            _run(runtime, "echo hi > note.txt")
            record = runtime.conversation_record
            assert record is not None
            keys[conversation] = record.storage_key
    table = sql_store._table
    with sql_store._engine.begin() as connection:
        connection.execute(
            update(table).where(table.c.storage_key == keys["idle"]).values(updated_at=OLD)
        )
    assert sql_store.delete(keys["orphaned"]) is not None
    assert [len(found) for found in labelled(docker_run)] == [3, 3]
    # Another deployment's reaper (other labels) sees none of them.
    stranger = DockerReaper(
        labels={"skillruntime-test-suite": "someone-else"}, orphan_grace_seconds=0
    )
    try:
        assert stranger.orphans(sql_store.list_records(limit=1000)) == []
    finally:
        stranger.close()
    reaper = DockerReaper(labels=suite_labels(docker_run), orphan_grace_seconds=0)
    try:
        report = sweep_conversations(sql_store, 3600, [reaper], orphans="destroy")
    finally:
        reaper.close()
    outcome = {item.conversation_id: item.action for item in report.outcomes}
    assert outcome == {"sweep-idle": "destroyed", "sweep-active": "kept"}
    assert {orphan.conversation_id for orphan in report.orphans} == {"sweep-orphaned"}
    assert report.orphans_destroyed == report.orphans_found == 2  # its container and volume
    containers, volumes = labelled(docker_run)
    assert len(containers) == 1
    assert len(volumes) == 1
    with _runtime(docker_run, sql_store, "sweep-active") as runtime:
        assert _run(runtime, "cat note.txt").stdout == "hi\n"
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_sweep_reaps_private_containers_whose_keep_alive_process_ended(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    client = engine_client()
    alive = _runtime(docker_run, None, None)
    dead = _runtime(docker_run, None, None)
    try:
        _run(alive, "true")
        _run(dead, "true")
        assert dead.container_id is not None
        client.api.kill(dead.container_id)  # the keep-alive process is gone, the runtime too
        reaper = DockerReaper(labels=suite_labels(docker_run), orphan_grace_seconds=0)
        try:
            found = reaper.orphans(sql_store.list_records(limit=1000))
            assert [orphan.sandbox_id for orphan in found] == [dead.container_id]
            assert found[0].conversation_id is None
            report = sweep_conversations(sql_store, 3600, [reaper], orphans="destroy")
        finally:
            reaper.close()
        assert report.orphans_destroyed == 1
        assert labelled(docker_run)[0] == [alive.container_id]
        assert _run(alive, "echo still").stdout == "still\n"
        patient = DockerReaper(labels=suite_labels(docker_run), orphan_grace_seconds=3600)
        try:
            client.api.kill(alive.container_id)
            assert patient.orphans([]) == []  # younger than the grace
        finally:
            patient.close()
    finally:
        dead.close()
        alive.close()
        client.close()


def test_exclusive_runtimes_of_one_conversation_take_turns(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    command = (
        "if ! mkdir busy 2>/dev/null; then echo OVERLAP >> log; fi; "
        "echo run >> log; sleep 0.05; rmdir busy"
    )
    errors: list[BaseException] = []

    def hammer() -> None:
        try:
            with _runtime(
                docker_run, sql_store, "turns-1", exclusive=True, lease_ttl_seconds=5.0
            ) as runtime:
                for _ in range(3):
                    assert _run(runtime, command).exit_code == 0
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with _runtime(docker_run, sql_store, "turns-1", exclusive=True) as runtime:
        log = runtime.get_file_system().read_text("log")
        assert log.split() == ["run"] * 9
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


# ------------------------------------------------------------------ plugin and audit


def test_the_listing_equals_the_one_derived_from_the_options_model() -> None:
    module = importlib.import_module("skillruntime.docker.plugin")
    assert listing_drift(module) == []
    (listing,) = module.skillruntime_runtime_listings()
    assert listing.name == "docker"
    assert listing.options


def test_container_lifecycle_and_commands_are_audited(
    docker_run: str, sql_store: SqlConversationStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER_NAME)
    with _runtime(docker_run, sql_store, "audit-1") as runtime:
        _run(runtime, "exit 3")
        runtime.destroy_conversation()
    events = [record.audit for record in caplog.records if record.name == AUDIT_LOGGER_NAME]
    kinds = [event["kind"] for event in events]
    for kind in ("sandbox.create", "sandbox.attach", "execute", "sandbox.destroy"):
        assert kind in kinds
    executed = next(event for event in events if event["kind"] == "execute")
    assert executed["exit_code"] == 3
    assert executed["runtime"] == "docker"
    assert executed["conversation_id"] == "audit-1"
    assert executed["sandbox_id"]


def test_a_read_only_image_keeps_a_writable_workspace(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    with _runtime(docker_run, sql_store, "readonly-1", read_only_root=True) as runtime:
        fs = runtime.get_file_system()
        fs.write_text("a/b.txt", "ok")
        assert [info.name for info in fs.list_directory("a")] == ["b.txt"]
        result = _run(runtime, "touch /etc/x")
        assert result.exit_code != 0
        assert "Read-only file system" in result.stderr
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_the_sweep_command_removes_an_idle_conversation_through_the_plugin(
    docker_run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    with SqlConversationStore(url, create_schema=True) as store:
        with _runtime(docker_run, store, "cli-idle") as runtime:
            _run(runtime, "echo hi > note.txt")
            record = runtime.conversation_record
            assert record is not None
        table = store._table
        with store._engine.begin() as connection:
            connection.execute(
                update(table)
                .where(table.c.storage_key == record.storage_key)
                .values(updated_at=OLD)
            )
    assert [len(found) for found in labelled(docker_run)] == [1, 1]
    monkeypatch.setenv("SKILLRUNTIME_DOCKER_LABELS", json.dumps(suite_labels(docker_run)))
    result = CliRunner().invoke(
        build_cli(),
        ["conversations", "sweep", "--idle", "1h", "--url", url, "--runtime", "docker", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["destroyed"] == 1
    assert labelled(docker_run) == ([], [])


def test_a_command_whose_container_vanishes_raises_and_is_not_retried(
    docker_run: str, sql_store: SqlConversationStore
) -> None:
    with _runtime(docker_run, sql_store, "gone-1") as runtime:
        _run(runtime, "true")
        old = runtime.container_id
        assert old is not None
        workspace = runtime.default_working_directory
        outcome: list[object] = []

        def long_command() -> None:
            try:
                outcome.append(_run(runtime, "echo started >> runs; sleep 60", timeout_seconds=20))
            except BaseException as error:  # collected and asserted below
                outcome.append(error)

        thread = threading.Thread(target=long_command)
        thread.start()
        deadline = time.monotonic() + 20
        client = engine_client()
        try:
            while time.monotonic() < deadline:
                ran = client.containers.get(old).exec_run(["cat", "runs"], workdir=workspace)
                if ran.exit_code == 0:
                    break
                time.sleep(0.1)
            client.containers.get(old).remove(force=True)
        finally:
            client.close()
        thread.join(60)  # at once, or (an engine leaving the stream open) at the deadline
        assert len(outcome) == 1, "the command did not end with its container"
        assert isinstance(outcome[0], ContainerReplacedError), outcome
        assert outcome[0].container_id == old
        # The next call attaches to a replacement on the same volume; the command ran once.
        assert _run(runtime, "cat runs").stdout == "started\n"
        assert runtime.container_id != old
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])
