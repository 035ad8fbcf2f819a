"""Real command execution for the OpenSandbox double, shaped like execd's ``/command``.

Each command runs as ``bash -c TEXT`` (or the literal ``argv``) in a new session (its own
process group) inside a private mount namespace, under a root file system of its own where
the sandbox's host directories are bind-mounted onto ``/workspace``, ``/tmp`` and ``/root``.
Like execd, stdout and stderr go to files that are tailed and turned into one event per line,
and the relative order of stdout and stderr lines is not preserved.

Line rules are execd's (``commandOutputTail``): ``\n`` and a bare ``\r`` each end a line,
``\r\n`` is one break, an empty line is the text ``"\n"``, a final unterminated line is sent
when the command ends, and a line is never split, whatever its length. execd holds a whole line
in memory before writing its event; the double writes the same event bytes but streams a long
line's text as it reads it (see :class:`Chunk`), so the double's own memory stays bounded.

Exit codes follow Go's ``ExitCode()``: the process's status, or ``-1`` when it was killed by a
signal (timeout, interrupt, sandbox deletion).
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import pwd
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doubles.opensandbox.registry import Sandbox, iso
from doubles.opensandbox.sandboxfs import ApiError, base_env, resolve

log = logging.getLogger(__name__)

READ_BLOCK = 64 * 1024
PIECE_BYTES = 1024 * 1024
"""A longer unfinished line is handed on in pieces of this size (all within one event)."""
POLL_INTERVAL = 0.02

FREEZER_ROOT = Path("/sys/fs/cgroup/freezer")
_CGROUP_CREATE_ATTEMPTS = 5

# Runs as PID-group leader in a fresh mount namespace: join the sandbox's cgroup (when there
# is one), build the sandbox's root file system and enter it, then exec the command (so the
# exit status is the command's own). The root is a read-only overlay of the host's ``/`` under
# a one-directory skeleton on a namespace-private tmpfs (so ``/workspace`` exists inside the
# sandbox without ever being created on the host), with the host's other mounts bound in and
# the sandbox's private trees bound over ``/workspace``, ``/tmp`` and ``/root``; every mount
# is listed in the sandbox's fstab (see :func:`sandbox_fstab`) and lives in this namespace
# only. The programs the sandbox's image lacks are overlay whiteouts in the skeleton (a
# character device 0/0 at a path hides that path of the layers below it), so inside the
# sandbox they are missing for real. Arguments: $1 skeleton dir, $2 fstab, $3 root dir, $4
# working directory, $5 cgroup procs file (may be empty), $6 the host paths to hide
# (space-separated, may be empty), then the command.
_WRAPPER = (
    'if [ -n "$5" ]; then echo $$ > "$5" || exit 125; fi; '
    'mount -t tmpfs -o size=64k,mode=755 skeleton "$1" || exit 125; '
    'mkdir "$1/workspace" || exit 125; '
    'for w in $6; do mkdir -p "$1${w%/*}" && mknod "$1$w" c 0 0 || exit 125; done; '
    'mount -a -T "$2" || exit 125; '
    'root="$3"; cwd="$4"; shift 6; '
    'exec chroot "$root" /bin/sh -c \'cd "$1" || exit 1; shift; exec "$@"\' sh "$cwd" "$@"'
)
_PRIVATE_MOUNTS = ("/workspace", "/tmp", "/root")
TOOL_DIRECTORIES = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""Where an image's programs live: the sandbox's ``PATH`` and ``command -p``'s default path."""


def tool_whiteouts(tools: tuple[str, ...]) -> list[str]:
    """The host paths that hide ``tools`` from a sandbox: every copy of each in the
    :data:`TOOL_DIRECTORIES`, symlinked directories resolved (``/bin`` may be ``usr/bin``)."""
    paths: list[str] = []
    for tool in tools:
        for directory in TOOL_DIRECTORIES:
            path = os.path.join(os.path.realpath(directory), tool)
            if os.path.lexists(path) and path not in paths:
                if any(character.isspace() for character in path):
                    raise ValueError(f"cannot hide {path!r} (white space)")
                paths.append(path)
    return paths


def _host_submounts() -> list[str]:
    """Mount points (mountinfo-escaped) the host has on top of its root file system, outside
    the sandbox's private trees; each is bound into the sandbox root recursively."""
    entries = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    root_ids = {fields[0] for fields in entries if fields[4] == "/"}
    points = []
    for fields in entries:
        point = fields[4]
        if fields[1] not in root_ids or point == "/":
            continue
        if any(point == p or point.startswith(p + "/") for p in _PRIVATE_MOUNTS):
            continue
        points.append(point)
    return points


def sandbox_fstab(sandbox: Sandbox, skeleton: Path, root: Path) -> str:
    """The mounts that make up a sandbox's root file system, in ``mount -a`` order."""
    lines = [f"overlay {root} overlay ro,lowerdir={skeleton}:/ 0 0"]
    lines += [f"{point} {root}{point} none rbind 0 0" for point in _host_submounts()]
    lines += [
        f"{sandbox.workspace} {root}/workspace none bind 0 0",
        f"{sandbox.home} {root}/root none bind 0 0",
        f"{sandbox.tmp} {root}/tmp none bind 0 0",
    ]
    return "\n".join(lines) + "\n"


class SandboxCgroup:
    """A cgroup-v1 freezer group holding every process of one sandbox.

    It gives the double a container's guarantees: deleting the sandbox kills exactly its
    processes (also those a finished command left behind), and pausing freezes them the way
    ``docker pause`` does. When the freezer hierarchy is not writable, ``create`` returns
    ``None`` and the double falls back to process groups.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, sandbox_id: str) -> SandboxCgroup | None:
        path = FREEZER_ROOT / f"opensandbox-double-{os.getpid()}" / sandbox_id
        for _ in range(_CGROUP_CREATE_ATTEMPTS):
            try:
                path.mkdir(parents=True)
            except FileNotFoundError:
                # Deleting the last other sandbox removes the shared parent group; if that
                # happened between creating the parent and the leaf, create both again.
                continue
            except OSError:
                break
            return cls(path)
        log.info("freezer cgroup unavailable; falling back to process groups")
        return None

    @property
    def procs_file(self) -> str:
        """File a process writes its pid to in order to join."""
        return str(self.path / "cgroup.procs")

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def set_frozen(self, frozen: bool) -> None:
        with contextlib.suppress(OSError):
            (self.path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def kill_all(self, timeout: float = 5.0) -> None:
        """SIGKILL every member until the group is empty, then remove it."""
        deadline = time.monotonic() + timeout
        self.set_frozen(False)
        while time.monotonic() < deadline:
            members = self.pids()
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            self.path.rmdir()
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()


# How Go's ``ProcessState.String()`` names the signals a command may die of.
_SIGNAL_TEXT = {
    signal.SIGKILL: "killed",
    signal.SIGTERM: "terminated",
    signal.SIGINT: "interrupt",
    signal.SIGHUP: "hangup",
    signal.SIGQUIT: "quit",
    signal.SIGABRT: "aborted",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGPIPE: "broken pipe",
    signal.SIGBUS: "bus error",
    signal.SIGFPE: "floating point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGUSR1: "user defined signal 1",
    signal.SIGUSR2: "user defined signal 2",
    signal.SIGALRM: "alarm clock",
}


def exit_text(returncode: int) -> str:
    """Go's wording of a process end: ``exit status N`` or ``signal: NAME``."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"signal: signal {-returncode}"
    return "signal: " + _SIGNAL_TEXT.get(sig, f"signal {-returncode}")


def now_ms() -> int:
    """Milliseconds since the epoch, the ``timestamp`` of every event."""
    return int(time.time() * 1000)


@dataclass
class CommandRecord:
    """One command of one sandbox, foreground or background."""

    id: str
    content: str
    background: bool
    started_at: float
    stdout_path: Path
    stderr_path: Path
    process: subprocess.Popen[bytes] | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    end_text: str = ""
    killed: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def running(self) -> bool:
        """Whether the process has not finished yet."""
        return not self.done.is_set()

    def status_json(self) -> dict[str, Any]:
        """The body of ``GET /command/status/{id}``."""
        import datetime as dt

        def stamp(value: float) -> str:
            return iso(dt.datetime.fromtimestamp(value, dt.UTC))

        body: dict[str, Any] = {
            "id": self.id,
            "content": self.content,
            "running": self.running,
            "started_at": stamp(self.started_at),
        }
        if not self.running:
            body["exit_code"] = self.exit_code
            body["finished_at"] = stamp(self.finished_at or time.time())
            if self.exit_code not in (0, None):
                body["error"] = self.end_text
        return body


class CommandTable:
    """The commands of one sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox
        self._lock = threading.Lock()
        self._records: dict[str, CommandRecord] = {}
        self.removed = False
        """Set once the sandbox was deleted (every process killed)."""
        self.gone = threading.Event()
        """Set as soon as the sandbox is being removed, before anything is killed: its execd
        dies with it, so every stream it is still writing is cut (see :meth:`retire`)."""
        self._cgroup = SandboxCgroup.create(sandbox.id)
        self._skeleton = sandbox.staging / "rootfs-skeleton"
        self._rootfs = sandbox.staging / "rootfs"
        self._fstab = sandbox.staging / "rootfs.fstab"
        self._skeleton.mkdir(exist_ok=True)
        self._rootfs.mkdir(exist_ok=True)
        self._fstab.write_text(sandbox_fstab(sandbox, self._skeleton, self._rootfs))
        self._hidden = " ".join(tool_whiteouts(sandbox.missing_tools))

    # -- lookup --------------------------------------------------------------------------

    def get(self, command_id: str) -> CommandRecord | None:
        """The record of a command of this sandbox, if any."""
        with self._lock:
            return self._records.get(command_id)

    # -- start ---------------------------------------------------------------------------

    def start(self, body: dict[str, Any]) -> CommandRecord:
        """Validate a ``/command`` request body and start the process.

        Raises :class:`ApiError` (400 ``INVALID_REQUEST_BODY``) for a malformed body, and
        ``OSError``-derived :class:`SpawnError` when the process cannot be started (for
        example a missing working directory), which the caller reports as an ``error`` event.
        """
        command = body.get("command")
        argv = body.get("argv")
        if argv is not None:
            if command:
                raise ApiError(
                    400, "INVALID_REQUEST_BODY", "command and argv are mutually exclusive"
                )
            if (
                not isinstance(argv, list)
                or not argv
                or not all(isinstance(a, str) for a in argv)
                or not argv[0]
            ):
                raise ApiError(400, "INVALID_REQUEST_BODY", "argv must be a non-empty string list")
            exec_args = list(argv)
            content = " ".join(argv)
        else:
            if not isinstance(command, str) or not command.strip():
                raise ApiError(400, "INVALID_REQUEST_BODY", "command is required")
            exec_args = ["bash", "-c", command]
            content = command
        timeout_ms = body.get("timeout")
        if timeout_ms is not None and (
            not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0
        ):
            raise ApiError(400, "INVALID_REQUEST_BODY", "timeout must be a non-negative integer")
        envs = body.get("envs") or {}
        if not isinstance(envs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in envs.items()
        ):
            raise ApiError(400, "INVALID_REQUEST_BODY", "envs must map strings to strings")
        exec_args = _with_identity(exec_args, body.get("uid"), body.get("gid"))
        background = bool(body.get("background", False))
        cwd_raw = body.get("cwd") or "/"
        if not isinstance(cwd_raw, str):
            raise ApiError(400, "INVALID_REQUEST_BODY", "cwd must be a string")
        env = base_env(self._sandbox)
        env.update(envs)
        cwd = resolve(self._sandbox, cwd_raw)
        if not cwd.host.is_dir():
            raise SpawnError(f"chdir {cwd.sandbox_path}: no such file or directory")

        command_id = uuid.uuid4().hex
        staging = self._sandbox.staging
        record = CommandRecord(
            id=command_id,
            content=content,
            background=background,
            started_at=time.time(),
            stdout_path=staging / f"{command_id}.stdout",
            stderr_path=(
                staging / f"{command_id}.stdout" if background else staging / f"{command_id}.stderr"
            ),
        )
        with open(record.stdout_path, "ab") as out:
            err_target = out if background else open(record.stderr_path, "ab")  # noqa: SIM115
            try:
                record.process = self.spawn(
                    exec_args, cwd.sandbox_path, env, subprocess.DEVNULL, out, err_target
                )
            finally:
                if err_target is not out:
                    err_target.close()
        with self._lock:
            self._records[command_id] = record
        threading.Thread(
            target=self._wait, args=(record, timeout_ms), daemon=True, name=f"wait-{command_id}"
        ).start()
        return record

    def spawn(
        self,
        exec_args: list[str],
        cwd: str,
        env: dict[str, str],
        stdin: Any,
        stdout: Any,
        stderr: Any,
    ) -> subprocess.Popen[bytes]:
        """Start ``exec_args`` inside the sandbox (namespace, mounts, cgroup) in ``cwd``, as
        the leader of a new session. Raises :class:`SpawnError` when exec fails."""
        argv_full = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _WRAPPER,
            "sh",
            str(self._skeleton),
            str(self._fstab),
            str(self._rootfs),
            cwd,
            self._cgroup.procs_file if self._cgroup is not None else "",
            self._hidden,
            *exec_args,
        ]
        try:
            return subprocess.Popen(
                argv_full,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            raise SpawnError(str(exc)) from exc

    def _wait(self, record: CommandRecord, timeout_ms: int | None) -> None:
        assert record.process is not None
        timeout = timeout_ms / 1000.0 if timeout_ms else None
        try:
            record.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            record.killed = True
            self._signal(record, signal.SIGKILL)
            record.process.wait()
        code = record.process.returncode
        record.exit_code = -1 if code < 0 else code
        record.end_text = exit_text(code)
        record.finished_at = time.time()
        record.done.set()

    # -- control -------------------------------------------------------------------------

    @staticmethod
    def _signal(record: CommandRecord, sig: signal.Signals) -> None:
        if record.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.process.pid, sig)

    def interrupt(self, command_id: str) -> None:
        """SIGTERM the command's process group, then SIGKILL after one second."""
        record = self.get(command_id)
        if record is None or not record.running:
            raise ApiError(500, "RUNTIME_ERROR", f"command {command_id} is not running")
        record.killed = True
        self._signal(record, signal.SIGCONT)
        self._signal(record, signal.SIGTERM)
        if not record.done.wait(1.0):
            self._signal(record, signal.SIGKILL)

    def kill(self, record: CommandRecord) -> None:
        """SIGKILL one command's process group (client went away, fault injection)."""
        if record.running:
            record.killed = True
            self._signal(record, signal.SIGKILL)
            self._signal(record, signal.SIGCONT)

    def relay_signal(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the process group of every running command of the sandbox, as execd
        relays a signal it received (a SIGPIPE from a client that hung up). ``False`` (and
        nothing sent) once the sandbox was deleted: its execd is gone."""
        with self._lock:
            if self.removed:
                return False
            records = [record for record in self._records.values() if record.running]
        for record in records:
            self._signal(record, sig)
        return True

    def retire(self) -> None:
        """The sandbox is being removed (deleted, killed, expired): its execd dies with it, so
        every command stream still open is cut where it stands, without a terminal event or
        the chunked terminator (what a client of a real sandbox sees when its container is
        killed: the connection closes mid-body, httpx raises ``RemoteProtocolError``)."""
        self.gone.set()

    def kill_all(self) -> None:
        """SIGKILL every process of the sandbox, including leftovers of finished commands
        (``cmd &``) when the sandbox has a cgroup, and wait for the commands (deletion)."""
        self.retire()
        with self._lock:
            self.removed = True
            records = list(self._records.values())
        for record in records:
            record.killed = record.killed or record.running
        if self._cgroup is not None:
            self._cgroup.kill_all()
        else:
            # Without a cgroup only live process groups are safe to signal: the id of a
            # finished one may already belong to an unrelated process.
            for record in records:
                self.kill(record)
        for record in records:
            record.done.wait(5.0)

    def pause(self) -> None:
        """Freeze every process group of the sandbox (``docker pause``)."""
        with self._lock:
            records = list(self._records.values())
        if self._cgroup is not None:
            self._cgroup.set_frozen(True)
            return
        for record in records:
            if record.running:
                self._signal(record, signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw every frozen process group."""
        with self._lock:
            records = list(self._records.values())
        if self._cgroup is not None:
            self._cgroup.set_frozen(False)
            return
        for record in records:
            if record.running:
                self._signal(record, signal.SIGCONT)

    # -- output --------------------------------------------------------------------------

    def background_logs(self, command_id: str, cursor: int) -> tuple[bytes, int]:
        """Combined output of a background command from byte ``cursor`` on (at most 4 MiB),
        plus the cursor to poll from next."""
        record = self.get(command_id)
        if record is None or not record.background:
            raise ApiError(400, "INVALID_REQUEST_BODY", f"command {command_id} not found")
        try:
            with open(record.stdout_path, "rb") as fh:
                fh.seek(max(cursor, 0))
                data = fh.read(4 * 1024 * 1024)
        except FileNotFoundError:
            data = b""
        return data, max(cursor, 0) + len(data)

    def stream_lines(self, record: CommandRecord) -> Iterator[Chunk | None]:
        """Tail the command's output files until it finishes; yield the text of each line.

        ``None`` is yielded when nothing new arrived for a poll interval, so the caller can
        send keep-alive pings and notice a vanished client. While a long line is open (its
        first :class:`Chunk` yielded without ``end``) only that stream is read until the line
        ends, so the chunks of one event are never interleaved with another event.
        """
        tails = [
            _Tail("stdout", record.stdout_path),
            _Tail("stderr", record.stderr_path),
        ]
        try:
            while True:
                finished = record.done.is_set()
                produced = False
                for tail in tails:
                    if any(other.open for other in tails if other is not tail):
                        continue
                    for chunk in tail.read_available():
                        produced = True
                        yield chunk
                if finished and not produced:
                    for tail in tails:
                        rest = tail.flush()
                        if rest is not None:
                            yield rest
                    return
                if not produced:
                    yield None
                    record.done.wait(POLL_INTERVAL)
        finally:
            for tail in tails:
                tail.close()

    def forget_output(self, record: CommandRecord) -> None:
        """Delete a finished foreground command's output files."""
        for path in (record.stdout_path, record.stderr_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _with_identity(exec_args: list[str], uid: Any, gid: Any) -> list[str]:
    """Prefix ``setpriv`` when the request names a uid (and optionally a gid)."""
    for name, value in (("uid", uid), ("gid", gid)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise ApiError(400, "INVALID_REQUEST_BODY", f"{name} must be a non-negative integer")
    if uid is None:
        if gid is not None:
            raise ApiError(400, "INVALID_REQUEST_BODY", "gid requires uid")
        return exec_args
    if gid is None:
        try:
            gid = pwd.getpwuid(uid).pw_gid
        except KeyError:
            gid = uid
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--",
        *exec_args,
    ]


class SpawnError(Exception):
    """The command could not be started; execd reports this as an ``error`` event."""


@dataclass(frozen=True)
class Chunk:
    """Text of one output line, or a piece of it.

    ``start`` marks the first piece of an event and ``end`` the last; a line read whole is one
    chunk with both set. The pieces of one line are consecutive and make one event together.
    """

    kind: str
    text: str
    start: bool = True
    end: bool = True


_BREAK = re.compile(rb"[\r\n]")


class _Tail:
    """Incremental reader of one output file with execd's line rules."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self._path = path
        self._fh: Any = None
        self._partial = bytearray()
        self._last_was_cr = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.open = False
        """Whether the current line's event has started (a piece was already handed on)."""

    def _open(self) -> bool:
        if self._fh is None:
            try:
                self._fh = open(self._path, "rb")  # noqa: SIM115
            except FileNotFoundError:
                return False
        return True

    def _line_end(self) -> Chunk:
        chunk = Chunk(
            self.kind, self._decoder.decode(bytes(self._partial), final=True), not self.open
        )
        self._partial.clear()
        self._decoder.reset()
        self.open = False
        return chunk

    def read_available(self) -> Iterator[Chunk]:
        if not self._open():
            return
        for _ in range(16):
            block = self._fh.read(READ_BLOCK)
            if not block:
                return
            position = 0
            for match in _BREAK.finditer(block):
                index = match.start()
                if index > position:
                    self._partial += block[position:index]
                    self._last_was_cr = False
                position = index + 1
                byte = block[index]
                if self._partial or self.open:
                    yield self._line_end()
                elif not (byte == 0x0A and self._last_was_cr):
                    yield Chunk(self.kind, "\n")
                self._last_was_cr = byte == 0x0D
            if position < len(block):
                self._partial += block[position:]
                self._last_was_cr = False
            if len(self._partial) >= PIECE_BYTES:
                yield Chunk(
                    self.kind, self._decoder.decode(bytes(self._partial)), not self.open, False
                )
                self._partial.clear()
                self.open = True

    def flush(self) -> Chunk | None:
        if not self._partial and not self.open:
            return None
        return self._line_end()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
