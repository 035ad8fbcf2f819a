"""AIO runtime parts that need no service: options, plugin, wrapper script, archive, multipart."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import tarfile
import uuid
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doubles._polling import proc_state, process_gone, wait_until
from skillruntime.aio import AioRuntimeOptions, AioSandboxSkillRuntime
from skillruntime.aio.archive import build_skill_archive, unpack_command
from skillruntime.aio.client import AioClient
from skillruntime.aio.files import AioFileSystem
from skillruntime.aio.script import (
    WrapperOutcome,
    build_report,
    build_wrapper,
    parse_file_result,
    parse_inline_result,
    parse_stream_result,
    result_path,
    shell_line,
)
from skillruntime.core.errors import (
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
)
from skillruntime.core.plugins.registry import available_runtimes, create_runtime
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE
from skillruntime.core.skills.files import iter_skill_files
from skillruntime.core.testing import immutable_host_directory

# ------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "url",
    ["", "127.0.0.1:8080", "/v1", "ftp://host", "http://", "http://u:p@host", "http://h/?x=1"],
)
def test_base_url_must_be_an_absolute_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        AioRuntimeOptions(base_url=url)


def test_options_read_the_environment_and_hide_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLRUNTIME_AIO_BASE_URL", "https://sandbox.example:8443/")
    monkeypatch.setenv("SKILLRUNTIME_AIO_TOKEN", "jwt-secret-value")
    monkeypatch.setenv("SKILLRUNTIME_AIO_CONVERSATION_ID", "conv-1")
    options = AioRuntimeOptions()
    assert options.base_url == "https://sandbox.example:8443"
    assert options.conversations_root == "/home/gem/workspace/conversations"
    assert options.remote_root == "/home/gem/workspace/skills"
    assert "jwt-secret-value" not in repr(options)
    arguments = options.runtime_arguments()
    assert arguments["token"] == "jwt-secret-value"
    assert arguments["conversation_id"] == "conv-1"


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("conversation_id", "../x", "conversation"),
        ("remote_root", "relative/skills", "absolute"),
        ("read_timeout", 0, "greater than 0"),
        ("command_api", "ssh", "bash"),
    ],
)
def test_invalid_options_are_refused(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AioRuntimeOptions.model_validate({"base_url": "http://127.0.0.1:8080", field: value})


def test_the_plugin_registers_aio_and_builds_without_network() -> None:
    provider = available_runtimes()["aio"]
    assert provider.distribution == "skillruntime-aio"
    assert provider.options_model is AioRuntimeOptions
    runtime = create_runtime(
        "aio", base_url="http://127.0.0.1:9", conversation_id="p-1", token="t-secret"
    )
    try:
        assert isinstance(runtime, AioSandboxSkillRuntime)
        assert runtime.name == "aio"
        assert runtime.default_working_directory == "/home/gem/workspace/conversations/p-1"
        assert runtime.client.request_count == 0
    finally:
        runtime.close()


def test_client_sends_the_configured_credentials() -> None:
    client = AioClient("http://h:1", token="tok", api_key="key")
    try:
        headers = client._http.headers
        assert headers["Authorization"] == "Bearer tok"
        assert headers["X-AIO-API-Key"] == "key"
        assert "tok" not in repr(client)
    finally:
        client.close()


# ------------------------------------------------------------------ wrapper script


_TOKEN = uuid.uuid4().hex
_MARKER = f"{CANCEL_MARKER_VARIABLE}={_TOKEN}"  # unique: the report's sweep reads the host's /proc


def _wrap(tmp_path: Path, command: str, *, timeout: float = 10, cap: int = 4096) -> str:
    return build_wrapper(
        command=command,
        cwd=str(tmp_path),
        run_dir=str(tmp_path / "run"),
        run_id="r1",
        nonce="n0nce",
        cap=cap,
        timeout=timeout,
        to_file=False,
    )


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_wrapper_keeps_streams_apart_and_reports_the_exit_code(tmp_path: Path, shell: str) -> None:
    script = _wrap(tmp_path, "printf 'out'; printf 'err' >&2; exit 42")
    done = subprocess.run([shell, "-c", script], capture_output=True, text=True, check=True)
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None
    assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (42, b"out", b"err")
    assert not outcome.timed_out
    assert list((tmp_path / "run").iterdir()) == []


def test_wrapper_cuts_output_on_the_service_side(tmp_path: Path) -> None:
    script = _wrap(tmp_path, "printf 'HEAD'; head -c 100000 /dev/zero | tr '\\0' x; printf 'TAIL'")
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None
    assert outcome.stdout.startswith(b"HEADx")
    assert outcome.stdout.endswith(b"xTAIL")
    assert b"[95912 bytes truncated]" in outcome.stdout
    assert outcome.stdout_size == 100008


def test_wrapper_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = _wrap(
        tmp_path,
        f"echo started; sh -c 'sleep 30 & echo $! > {pid_file}; wait' & sleep 30",
        timeout=2,
    )
    done = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=20, check=False
    )
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None
    assert outcome.timed_out
    assert outcome.exit_code == -1
    assert outcome.stdout == b"started\n"
    # SIGKILL is sent before the report; the kernel ends the process when it next runs
    child = int(pid_file.read_text().strip())
    assert wait_until(lambda: process_gone(child), timeout=5.0), proc_state(child)


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_wrapper_without_watchdog_runs_the_command_in_a_subshell(
    tmp_path: Path, shell: str
) -> None:
    """No watchdog (the service enforces the deadline): the command is a subshell of the
    wrapper; ``exit`` and ``cd`` end there, and the kept files are left empty."""
    script = build_wrapper(
        command="cd /; printf 'out'; printf 'err' >&2; exit 7",
        cwd=str(tmp_path),
        run_dir=str(tmp_path / "run"),
        run_id="s1",
        nonce="n0nce",
        cap=4096,
        timeout=10,
        to_file=False,
        watchdog=False,
        keep_files=True,
    )
    done = subprocess.run([shell, "-c", script], capture_output=True, text=True, check=True)
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None, done.stderr
    assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (7, b"out", b"err")
    assert not outcome.timed_out
    files = sorted((tmp_path / "run").iterdir())
    assert [p.name for p in files] == ["s1.e", "s1.o", "s1.p"]
    assert [p.read_text().strip() for p in files] == ["", "", ""]


def _bare_wrapper(tmp_path: Path, command: str) -> str:
    return build_wrapper(
        command=command,
        cwd=str(tmp_path),
        run_dir=str(tmp_path / "run"),
        run_id="s1",
        nonce="n0nce",
        cap=4096,
        timeout=10,
        to_file=False,
        watchdog=False,
        keep_files=True,
    )


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("exit 3", 3),
        ("kill -KILL $BASHPID", 137),
        ("kill -SEGV $BASHPID", 139),
        ("sh -c 'kill -TERM $$'; exit $?", 143),
        ("kill -INT $BASHPID; kill -QUIT $BASHPID; echo survived", 0),
    ],
)
def test_wrapper_without_watchdog_gives_the_command_its_own_process_group(
    tmp_path: Path, command: str, code: int
) -> None:
    """The command's subshell leads a process group of its own (not the wrapper's), ignores
    SIGINT and SIGQUIT, reports its exact status (128+N when a signal ended it), reads an empty
    stdin, and no job notice reaches the wrapper's streams."""
    probe = (
        'read -r x; echo "in=$?" >&2; me=$BASHPID; '
        "set -- $(cut -d' ' -f5 /proc/$me/stat) $(cut -d' ' -f5 /proc/$$/stat); "
        '[ "$1" = "$me" ] && [ "$2" != "$1" ] && echo "own group" >&2; '
    )
    done = subprocess.run(
        ["setsid", "bash", "-c", _bare_wrapper(tmp_path, probe + command)],
        capture_output=True,
        text=True,
        check=True,
    )
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None, done.stderr
    assert outcome.exit_code == code
    assert outcome.stderr == b"in=1\nown group\n" + (b"Terminated\n" if code == 143 else b"")
    assert outcome.stdout == (b"survived\n" if code == 0 else b"")
    assert outcome.stdout_size == len(outcome.stdout)
    assert (tmp_path / "run" / "s1.p").read_text().strip() == ""  # blanked once it ended


def test_the_report_kills_the_tree_of_a_run_whose_wrapper_alone_was_killed(
    tmp_path: Path,
) -> None:
    """A service that kills only the wrapper leaves the command's group running; the report
    kills that whole group (grandchildren too) before it reads the streams."""
    pids = tmp_path / "pids"
    started = tmp_path / "started"
    os.mkfifo(started)
    command = (
        f"echo begun; sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; "
        f"echo started > {started}; wait"
    )
    wrapper = subprocess.Popen(
        ["setsid", "bash", "-c", _bare_wrapper(tmp_path, command)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, CANCEL_MARKER_VARIABLE: _TOKEN},  # as the service starts it
    )
    try:
        assert started.read_text() == "started\n"  # blocks until the command wrote it
        wrapper.kill()
        wrapper.wait(10)
        children = [int(pid) for pid in pids.read_text().split()]
        # the wrapper's death left them running
        assert not any(process_gone(pid) for pid in children)
        script = build_report(
            run_dir=str(tmp_path / "run"),
            run_id="s1",
            nonce="n1",
            cap=64,
            marker=_MARKER,
            keep_files=True,
        )
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
        outcome = parse_stream_result("n1", done.stdout, done.stderr)
        assert outcome is not None
        assert (outcome.timed_out, outcome.stdout) == (True, b"begun\n")
        assert wait_until(lambda: all(process_gone(pid) for pid in children), timeout=5)
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


@pytest.mark.parametrize("recorded", ["", "-1", "12x", "$(touch pwned)"])
def test_the_report_kills_nothing_for_a_recorded_group_that_is_not_a_pid(
    tmp_path: Path, recorded: str
) -> None:
    """(Records naming real processes, ``1`` and ``01`` included, are tested in a PID
    namespace of their own: ``test_aio_group_record.py``.)"""
    run = tmp_path / "run"
    run.mkdir()
    (run / "s1.p").write_text(recorded + "\n")
    script = build_report(
        run_dir=str(run), run_id="s1", nonce="n1", cap=20, marker=_MARKER, keep_files=True
    )
    done = subprocess.run(
        ["setsid", "sh", "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    outcome = parse_stream_result("n1", done.stdout, done.stderr)
    assert outcome is not None
    assert (outcome.stdout, outcome.stderr) == (b"", b"")
    assert not (tmp_path / "pwned").exists()
    assert (run / "s1.p").read_text().split("\n")[0].strip() == ""  # the record is blanked


def test_the_report_of_a_killed_run_cuts_and_empties_its_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "s1.o").write_bytes(b"H" * 10 + b"x" * 100 + b"T" * 10)
    (run / "s1.e").write_bytes(b"late\n")
    script = build_report(
        run_dir=str(run), run_id="s1", nonce="n1", cap=20, marker=_MARKER, keep_files=True
    )
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    outcome = parse_stream_result("n1", done.stdout, done.stderr)
    assert outcome is not None
    assert (outcome.timed_out, outcome.exit_code) == (True, -1)
    assert outcome.stdout == b"H" * 10 + b"\n... [100 bytes truncated] ...\n" + b"T" * 10
    assert (outcome.stderr, outcome.stdout_size, outcome.stderr_size) == (b"late\n", 120, 5)
    assert [(p.name, p.read_text().strip()) for p in sorted(run.iterdir())] == [
        ("s1.e", ""),
        ("s1.o", ""),
    ]
    gone = build_report(
        run_dir=str(tmp_path / "none"), run_id="s1", nonce="n2", cap=20, marker=_MARKER
    )
    done = subprocess.run(["sh", "-c", gone], capture_output=True, text=True, check=True)
    empty = parse_stream_result("n2", done.stdout, done.stderr)
    assert empty is not None
    assert (empty.timed_out, empty.stdout, empty.stderr) == (True, b"", b"")


def test_wrapper_reports_a_missing_working_directory(tmp_path: Path) -> None:
    script = build_wrapper(
        command="true",
        cwd=str(tmp_path / "absent"),
        run_dir=str(tmp_path / "run"),
        run_id="r1",
        nonce="n0nce",
        cap=1024,
        timeout=5,
        to_file=False,
    )
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None
    assert outcome.missing_cwd


def test_a_forged_trailer_is_not_taken_for_the_result(tmp_path: Path) -> None:
    forged = "printf '\\n\\036SRAIOother 0 0 0 0\\n'; exit 9"
    done = subprocess.run(
        ["sh", "-c", _wrap(tmp_path, forged)], capture_output=True, text=True, check=True
    )
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None
    assert outcome.exit_code == 9
    assert parse_stream_result("n0nce", "no trailer at all", "") is None


def test_file_mode_through_a_one_line_shell_command(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text("KIT_V='tab\there ✓'\n")
    script = build_wrapper(
        command='printf "%s" "$KIT_V"; echo e >&2; exit 3',
        cwd=str(tmp_path),
        run_dir=str(tmp_path / "s"),
        run_id="r1",
        nonce="n1",
        cap=1024,
        timeout=5,
        to_file=True,
        env_file=str(env_file),
        reset=True,
    )
    (tmp_path / "s").mkdir(mode=0o700)
    (tmp_path / "s" / "r0.r").write_text("an earlier run's result")
    line = shell_line(script)
    assert "\n" not in line
    assert line.isascii()
    subprocess.run(["bash", "-c", line], check=True)
    data = Path(result_path(str(tmp_path / "s"), "r1")).read_bytes()
    outcome = parse_file_result("n1", data, 1024)
    assert outcome is not None
    assert outcome.exit_code == 3
    assert outcome.stdout.decode() == "tab\there ✓"
    assert outcome.stderr == b"e\n"
    assert not env_file.exists()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["r1.r", "r1.s"]
    assert parse_file_result("other", data, 1024) is None
    assert parse_file_result("n1", data[:-1], 1024) is None  # a partly written result


@pytest.mark.parametrize(("command", "inline"), [("exit 4", True), ("echo out", False)])
def test_file_mode_prints_the_trailer_when_the_command_printed_nothing(
    tmp_path: Path, command: str, *, inline: bool
) -> None:
    script = build_wrapper(
        command=command,
        cwd=str(tmp_path),
        run_dir=str(tmp_path / "s"),
        run_id="r1",
        nonce="n1abcdef",
        cap=1024,
        timeout=5,
        to_file=True,
        reset=True,
    )
    line = shell_line(script)
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=False)
    assert "SRAIOn1abcdef" not in line.replace("SRAIOn1abcdef %s", "")
    outcome = parse_inline_result("n1abcdef", done.stdout)
    if inline:
        assert outcome is not None
        assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (4, b"", b"")
    else:
        assert outcome is None
        assert done.stdout == ""
    assert parse_inline_result("other", done.stdout) is None
    data = Path(result_path(str(tmp_path / "s"), "r1")).read_bytes()
    assert parse_file_result("n1abcdef", data, 1024) is not None


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_wrapper_variables_do_not_meet_the_command_environment(tmp_path: Path, shell: str) -> None:
    names = ["C", "D", "P", "W", "B", "RC", "TO", "NO", "NE", "IFS", "e"]
    script = _wrap(tmp_path, " ".join(f'printf "%s;" "${{{n}-unset}}";' for n in names[:-2]))
    env = {"PATH": "/nonexistent", **{n: f"v{n}" for n in names[:-1]}}
    done = subprocess.run(
        [f"/bin/{shell}", "-c", script], capture_output=True, text=True, check=True, env=env
    )
    outcome = parse_stream_result("n0nce", done.stdout, done.stderr)
    assert outcome is not None, done.stderr
    assert outcome.exit_code == 0
    assert outcome.stdout.decode() == "".join(f"v{n};" for n in names[:-2])
    assert list((tmp_path / "run").iterdir()) == []


@pytest.mark.parametrize(
    ("text", "as_base64"),
    [("mostly ascii: a!b \\ c 'd' \"e\" $HOME `x` \t tab ✓", False), ("✓ non-ascii " * 40, True)],
)
def test_shell_line_carries_any_text_as_one_printable_line(text: str, as_base64: bool) -> None:
    line = shell_line(f"printf '%s' {shlex.quote(text)}\nexit 5\n")
    assert line.isascii()
    assert line.isprintable()
    assert "!" not in line
    assert ("base64 -d" in line) is as_base64
    done = subprocess.run(["bash", "-c", line + '; echo " rc=$?"'], capture_output=True, check=True)
    assert done.stdout.decode() == text + " rc=5\n"


_ESCAPED_BYTES = st.sampled_from([chr(code) for code in range(0xDC80, 0xDD00)])
"""The lone surrogates that ``surrogateescape`` turns into the bytes 0x80 to 0xff."""


@settings(max_examples=12, deadline=None)
@given(
    st.lists(
        st.text(
            st.one_of(
                st.characters(codec="utf-8", blacklist_characters="\x00"),
                _ESCAPED_BYTES,
            )
        ),
        min_size=1,
        max_size=20,
    )
)
def test_bash_decodes_every_shell_line_to_the_script_s_bytes(texts: list[str]) -> None:
    """Generated text (any character but NUL and the lone surrogates, and the lone surrogates that
    stand for undecodable bytes), each as one line, all evaluated by one real bash. Other lone
    surrogates stand for no bytes: :class:`SkillExecutionRequest` refuses them before any runtime
    builds a line (``tests/core/test_models.py``)."""
    lines = [shell_line(f"printf '%s\\n' {shlex.quote(text)}") for text in texts]
    assert all(line.isascii() and line.isprintable() and "!" not in line for line in lines)
    done = subprocess.run(["bash", "-c", "\n".join(lines)], capture_output=True, check=True)
    expected = b"".join(text.encode("utf-8", "surrogateescape") + b"\n" for text in texts)
    assert done.stdout == expected


# ------------------------------------------------------------------------- archive


def _skill(tmp_path: Path) -> Path:
    root = tmp_path / "skill"
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    (root / "scripts" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (root / "scripts" / "run.sh").chmod(0o755)
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "data.bin").write_bytes(bytes(range(256)))
    return root


def test_archive_keeps_modes_and_unpacks_in_place(tmp_path: Path) -> None:
    files = list(iter_skill_files(_skill(tmp_path)))
    archive, size = build_skill_archive(files)
    upload = tmp_path / "upload.tar.gz"
    with archive:
        upload.write_bytes(archive.read())
    assert upload.stat().st_size == size
    with tarfile.open(upload) as tar:
        modes = {m.name: m.mode for m in tar.getmembers() if m.isfile()}
    assert modes == {"SKILL.md": 0o644, "scripts/run.sh": 0o755, "deep/er/data.bin": 0o644}
    target = tmp_path / "out" / "s-123"
    (target).mkdir(parents=True)
    (target / "stale.txt").write_text("from an incomplete copy")
    subprocess.run(["sh", "-c", unpack_command(str(upload), str(target))], check=True)
    assert (target / "deep" / "er" / "data.bin").read_bytes() == bytes(range(256))
    assert os.access(target / "scripts" / "run.sh", os.X_OK)
    assert not os.access(target / "SKILL.md", os.X_OK)
    assert not (target / "stale.txt").exists()
    assert not upload.exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["s-123"]


def _evil_archive(path: Path, kind: str) -> None:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("ok.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
        if kind == "symlink":
            link = tarfile.TarInfo("link")
            link.type = tarfile.SYMTYPE
            link.linkname = "/etc/passwd"
            tar.addfile(link)
        else:
            name = {"dotdot": "../escaped.txt", "absolute": "/tmp/escaped-abs.txt"}[kind]
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"evil"))


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_unpack_refuses_members_that_escape(tmp_path: Path, kind: str) -> None:
    upload = tmp_path / "evil.tar.gz"
    _evil_archive(upload, kind)
    target = tmp_path / "out" / "target"
    done = subprocess.run(
        ["sh", "-c", unpack_command(str(upload), str(target))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert "skill archive" in done.stderr
    assert not target.exists()
    assert not (tmp_path / "out" / "escaped.txt").exists()
    assert not upload.exists()
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir())


# ----------------------------------------------------------------------- multipart


def test_multipart_body_streams_with_an_exact_length() -> None:
    """The sync client's upload body: streamed in bounded blocks from the source's current
    position, announced with an exact ``Content-Length`` (no chunked encoding), its form field
    and closing boundary framed as the service expects."""
    payload = os.urandom(3 * (1 << 20) + 12_345)
    reads: list[int] = []

    class Recording(io.BytesIO):
        def read(self, size: int | None = -1, /) -> bytes:
            reads.append(-1 if size is None else size)
            return super().read(size)

    source = Recording(b"prefix" + payload)
    source.seek(6)
    seen: dict[str, object] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["body"] = request.read()
        seen["headers"] = request.headers
        return httpx.Response(200, json={"success": True, "message": "ok", "data": {}})

    client = AioClient("http://aio.invalid")
    client._http = httpx.Client(transport=httpx.MockTransport(handler))
    try:
        client.upload("/home/gem/x.bin", source, len(payload))
    finally:
        client.close()
    data = seen["body"]
    headers = seen["headers"]
    assert isinstance(data, bytes)
    assert isinstance(headers, httpx.Headers)
    assert int(headers["Content-Length"]) == len(data)
    assert "Transfer-Encoding" not in headers
    assert reads
    assert all(0 < size <= 1 << 20 for size in reads)  # bounded blocks, never read(-1)
    assert payload in data
    boundary = headers["Content-Type"].split("boundary=", 1)[1]
    assert data.endswith(f"--{boundary}--\r\n".encode())
    assert b'name="path"\r\n\r\n/home/gem/x.bin\r\n' in data


# ------------------------------------------------------------------- file errors


def test_file_command_failures_are_typed_by_the_reason_coreutils_prints(tmp_path: Path) -> None:
    """The stderr of real GNU tools (``LC_ALL=C``, as the file commands run) names the kind."""
    plain = tmp_path / "plain.txt"
    plain.write_text("p")
    (tmp_path / "dir").mkdir()
    (tmp_path / "locked").mkdir()
    q = shlex.quote
    cases: list[tuple[str, type[RuntimeFileError]]] = [
        (f"mkdir -p -- {q(str(plain))}", NotADirectoryFileError),
        (f"mkdir -p -- {q(str(plain / 'sub'))}", NotADirectoryFileError),
        (f"mv -fT -- {q(str(plain))} {q(str(tmp_path / 'dir'))}", RuntimeIsADirectoryError),
        (f"mv -fT -- {q(str(tmp_path / 'none'))} {q(str(plain))}", RuntimeFileNotFoundError),
        (f"mkdir -- {q(str(tmp_path / 'locked' / 'sub'))}", RuntimePermissionError),
        ("echo 'something else broke' >&2; exit 1", RuntimeFileError),
    ]
    undo = immutable_host_directory(tmp_path / "locked")
    try:
        for command, kind in cases:
            done = subprocess.run(
                ["bash", "-c", "export LC_ALL=C; " + command], capture_output=True, check=False
            )
            assert done.returncode != 0, command
            outcome = WrapperOutcome(
                exit_code=done.returncode,
                timed_out=False,
                missing_cwd=False,
                stdout=b"",
                stderr=done.stderr,
                stdout_size=0,
                stderr_size=len(done.stderr),
            )
            error = AioFileSystem._failure(outcome, "write", "/home/gem/x")
            assert type(error) is kind, (command, done.stderr)
            assert error.path == "/home/gem/x"
    finally:
        undo()
