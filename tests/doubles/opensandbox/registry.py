"""Sandbox registry of the OpenSandbox double: lifecycle state, expiry, statistics and faults.

The registry is the single shared state of the double's server process. Every method is
thread-safe (one lock); the HTTP handlers call it from many threads at once.

Lifecycle semantics follow the Docker runtime of ``opensandbox-server`` 1.1.1:

* a created sandbox is ``Running`` at once (the create response already says so);
* ``timeout`` is whole seconds, at least 60, or ``null`` for no expiry;
* when ``expiresAt`` passes, the sandbox is removed (its processes are killed and its
  filesystem deleted) and from then on every call about it answers 404
  ``DOCKER::SANDBOX_NOT_FOUND``, exactly like a deleted one;
* ``pause`` freezes the sandbox's processes (SIGSTOP) and ``resume`` thaws them (SIGCONT).

The double has a clock offset (``advance_clock``) so tests can make a sandbox expire without
waiting a real minute.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import shutil
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from doubles.opensandbox.commands import CommandTable
    from doubles.opensandbox.sessions import SessionTable

log = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
STATE_RUNNING = "Running"
DEFAULT_TAIL_DELAY = 1.0
"""Seconds a command stream stays open after its terminal event (execd's
``EXECD_API_GRACE_SHUTDOWN`` default)."""
STATE_PAUSED = "Paused"


def iso(moment: dt.datetime) -> str:
    """Render an aware datetime the way the server does (RFC 3339, UTC, ``Z``)."""
    text: str = moment.astimezone(dt.UTC).isoformat()
    return text.replace("+00:00", "Z")


@dataclass
class Sandbox:
    """One sandbox: its lifecycle record plus the host directory that backs its filesystem."""

    id: str
    root: Path
    image: dict[str, Any] | None
    snapshot_id: str | None
    entrypoint: list[str]
    env: dict[str, str]
    metadata: dict[str, str]
    resource_limits: dict[str, Any]
    extensions: dict[str, Any] | None
    platform: dict[str, Any] | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    state: str = STATE_RUNNING
    reason: str = "CONTAINER_RUNNING"
    message: str = "Sandbox container started successfully."
    last_transition_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    missing_tools: tuple[str, ...] = ()
    """Programs the sandbox's image lacks (see :meth:`Registry.set_image_profile`): its
    commands find none of them, wherever the host has them."""
    commands: CommandTable | None = None
    sessions: SessionTable | None = None

    @property
    def workspace(self) -> Path:
        """Host directory mounted at ``/workspace`` inside the sandbox."""
        return self.root / "workspace"

    @property
    def tmp(self) -> Path:
        """Host directory mounted at ``/tmp`` inside the sandbox."""
        return self.root / "tmp"

    @property
    def home(self) -> Path:
        """Host directory mounted at ``/root`` (``$HOME``) inside the sandbox."""
        return self.root / "home"

    @property
    def staging(self) -> Path:
        """Host directory for the double's own scratch files (upload staging, logs)."""
        return self.root / "staging"

    def to_json(self) -> dict[str, Any]:
        """The ``Sandbox`` JSON object of the lifecycle API (camelCase keys)."""
        body: dict[str, Any] = {
            "id": self.id,
            "status": {
                "state": self.state,
                "reason": self.reason,
                "message": self.message,
                "lastTransitionAt": iso(self.last_transition_at),
            },
            "entrypoint": list(self.entrypoint),
            "createdAt": iso(self.created_at),
            "metadata": dict(self.metadata),
            "expiresAt": iso(self.expires_at) if self.expires_at is not None else None,
        }
        if self.image is not None:
            body["image"] = self.image
        if self.snapshot_id is not None:
            body["snapshotId"] = self.snapshot_id
        if self.extensions:
            body["extensions"] = self.extensions
        if self.platform:
            body["platform"] = self.platform
        return body


@dataclass
class Fault:
    """One armed fault: what to do and how many more times.

    ``kind`` is ``"status"`` (answer ``status`` on the next ``count`` idempotent requests of
    ``plane``), ``"drop_after_terminal"`` (close the next ``count`` command streams right after
    their terminal event, without the chunked terminator), ``"no_terminal"`` (end the next
    ``count`` command streams cleanly after the output but without any terminal event) or
    ``"drop_mid_stream"`` (close the next ``count`` command streams abruptly once
    ``after_events`` output events were sent; the command is killed as for a vanished client)
    or ``"kill_after_upload"`` (let ``after_events`` more upload requests succeed, then destroy
    the sandbox that answered the last of them, as if it died right after that batch).
    """

    kind: str
    count: int
    status: int = 503
    plane: str = "any"
    retry_after: int | None = None
    after_events: int = 0


class Registry:
    """All sandboxes of one double process, plus its counters and armed faults."""

    def __init__(self, data_dir: Path) -> None:
        self._lock = threading.RLock()
        self._data_dir = data_dir
        self._sandboxes: dict[str, Sandbox] = {}
        self._clock_offset = 0.0
        self._faults: list[Fault] = []
        self._counters: Counter[str] = Counter()
        self._routes: Counter[str] = Counter()
        self.tail_delay = DEFAULT_TAIL_DELAY
        self.ping_interval = 3.0
        self.ignore_metadata_filter = False
        self._image_profiles: dict[str, tuple[str, ...]] = {}
        """A hostile or buggy server: ``GET /sandboxes`` lists every sandbox whatever the
        ``metadata`` filter asked for."""

    # -- clock -------------------------------------------------------------------------------

    def now(self) -> dt.datetime:
        """The double's notion of now: wall clock plus the test-controlled offset."""
        with self._lock:
            offset = self._clock_offset
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset)

    def advance_clock(self, seconds: float) -> None:
        """Move the double's clock forward; sandboxes whose expiry passes are reaped."""
        with self._lock:
            self._clock_offset += seconds
        self.reap_expired()

    # -- images ------------------------------------------------------------------------------

    def set_image_profile(self, uri: str, missing_tools: list[str] | tuple[str, ...]) -> None:
        """Make the sandboxes created from image ``uri`` from now on lack ``missing_tools``
        (program names such as ``setsid``): their commands find none of them on any path, as
        in a slim image that does not ship them (see :class:`~.commands.CommandTable`). An
        empty list gives the image the host's tools again."""
        tools = tuple(dict.fromkeys(missing_tools))
        for tool in tools:
            if not _TOOL_NAME.fullmatch(tool):
                raise ValueError(f"not a program name: {tool!r}")
        with self._lock:
            if tools:
                self._image_profiles[uri] = tools
            else:
                self._image_profiles.pop(uri, None)

    def image_profiles(self) -> dict[str, list[str]]:
        """Every image given a profile, with the programs it lacks."""
        with self._lock:
            return {uri: list(tools) for uri, tools in self._image_profiles.items()}

    # -- sandboxes ---------------------------------------------------------------------------

    def create(
        self,
        *,
        image: dict[str, Any] | None,
        snapshot_id: str | None,
        entrypoint: list[str],
        env: dict[str, str],
        metadata: dict[str, str],
        resource_limits: dict[str, Any],
        extensions: dict[str, Any] | None,
        platform: dict[str, Any] | None,
        timeout_seconds: int | None,
    ) -> Sandbox:
        """Create a running sandbox with an empty ``/workspace`` and ``/tmp``."""
        from doubles.opensandbox.commands import CommandTable
        from doubles.opensandbox.sessions import SessionTable

        sandbox_id = str(uuid.uuid4())
        root = self._data_dir / sandbox_id
        now = self.now()
        sandbox = Sandbox(
            id=sandbox_id,
            root=root,
            image=image,
            snapshot_id=snapshot_id,
            entrypoint=entrypoint,
            env=env,
            metadata=metadata,
            resource_limits=resource_limits,
            extensions=extensions,
            platform=platform,
            created_at=now,
            expires_at=(
                now + dt.timedelta(seconds=timeout_seconds) if timeout_seconds is not None else None
            ),
            last_transition_at=now,
        )
        if image is not None:
            with self._lock:
                sandbox.missing_tools = self._image_profiles.get(str(image.get("uri")), ())
        for directory in (sandbox.workspace, sandbox.tmp, sandbox.home, sandbox.staging):
            directory.mkdir(parents=True, exist_ok=True)
        sandbox.tmp.chmod(0o1777)
        sandbox.home.chmod(0o700)
        sandbox.commands = CommandTable(sandbox)
        sandbox.sessions = SessionTable(sandbox, sandbox.commands)
        with self._lock:
            self._sandboxes[sandbox_id] = sandbox
            self._counters["creates"] += 1
        return sandbox

    def get(self, sandbox_id: str) -> Sandbox | None:
        """The live sandbox with this id, or ``None`` when it never existed, died or expired."""
        self.reap_expired()
        with self._lock:
            return self._sandboxes.get(sandbox_id)

    def all(self) -> list[Sandbox]:
        """Every live sandbox, oldest first."""
        self.reap_expired()
        with self._lock:
            return sorted(self._sandboxes.values(), key=lambda s: s.created_at)

    def remove(self, sandbox_id: str, *, reason: str) -> bool:
        """Destroy a sandbox: kill its processes, delete its files. ``False`` if unknown.

        ``reason`` is the counter to bump: ``deletes`` (client DELETE), ``kills_behind_back``
        (test harness) or ``expired``.
        """
        with self._lock:
            sandbox = self._sandboxes.pop(sandbox_id, None)
            if sandbox is None:
                return False
            self._counters[reason] += 1
        if sandbox.commands is not None:
            sandbox.commands.retire()  # its execd goes first: every open stream is cut
        if sandbox.sessions is not None:
            sandbox.sessions.kill_all()
        if sandbox.commands is not None:
            sandbox.commands.kill_all()
        shutil.rmtree(sandbox.root, ignore_errors=True)
        log.info("sandbox %s removed (%s)", sandbox_id, reason)
        return True

    def reap_expired(self) -> None:
        """Remove every sandbox whose ``expiresAt`` lies in the past of the double's clock."""
        now = self.now()
        with self._lock:
            expired = [
                s.id
                for s in self._sandboxes.values()
                if s.expires_at is not None and s.expires_at <= now
            ]
        for sandbox_id in expired:
            self.remove(sandbox_id, reason="expired")

    def set_state(self, sandbox: Sandbox, state: str, reason: str, message: str) -> None:
        """Record a lifecycle transition."""
        with self._lock:
            sandbox.state = state
            sandbox.reason = reason
            sandbox.message = message
            sandbox.last_transition_at = self.now()

    def shutdown(self) -> None:
        """Destroy every sandbox (used when the double's process exits)."""
        with self._lock:
            ids = list(self._sandboxes)
        for sandbox_id in ids:
            self.remove(sandbox_id, reason="shutdown")

    # -- statistics --------------------------------------------------------------------------

    def count(self, name: str, amount: int = 1) -> None:
        """Bump a named counter."""
        with self._lock:
            self._counters[name] += amount

    def count_route(self, route: str) -> None:
        """Bump the request counter of a route template such as ``GET /v1/sandboxes/{id}``."""
        with self._lock:
            self._routes[route] += 1

    def stats(self) -> dict[str, Any]:
        """Snapshot of the counters, the live sandbox count and requests by route."""
        self.reap_expired()
        with self._lock:
            counters = dict(self._counters)
            return {
                "creates": counters.get("creates", 0),
                "deletes": counters.get("deletes", 0),
                "kills_behind_back": counters.get("kills_behind_back", 0),
                "expired": counters.get("expired", 0),
                "live_sandboxes": len(self._sandboxes),
                "live_sandbox_ids": sorted(self._sandboxes),
                "upload_requests": counters.get("upload_requests", 0),
                "uploaded_files": counters.get("uploaded_files", 0),
                "uploaded_bytes": counters.get("uploaded_bytes", 0),
                "commands": counters.get("commands", 0),
                "grace_hangups": counters.get("grace_hangups", 0),
                "faults_fired": counters.get("faults_fired", 0),
                "requests": dict(self._routes),
                "counters": counters,
            }

    def reset_stats(self) -> None:
        """Zero every counter (live sandboxes are untouched)."""
        with self._lock:
            self._counters.clear()
            self._routes.clear()

    # -- faults ------------------------------------------------------------------------------

    def after_upload(self, sandbox_id: str) -> None:
        """Called once an upload request succeeded: fires an armed ``kill_after_upload``."""
        with self._lock:
            fault = next((f for f in self._faults if f.kind == "kill_after_upload"), None)
            if fault is None:
                return
            fault.after_events -= 1
            if fault.after_events > 0:
                return
            self._faults.remove(fault)
            self._counters["faults_fired"] += 1
        self.remove(sandbox_id, reason="kills_behind_back")

    def add_fault(self, fault: Fault) -> None:
        """Arm a fault."""
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        """Disarm every fault."""
        with self._lock:
            self._faults.clear()

    def take_fault(self, kinds: tuple[str, ...], plane: str | None = None) -> Fault | None:
        """Consume one use of the first armed fault of one of ``kinds`` matching ``plane``."""
        with self._lock:
            for fault in self._faults:
                if fault.kind not in kinds:
                    continue
                if plane is not None and fault.plane not in ("any", plane):
                    continue
                fault.count -= 1
                if fault.count <= 0:
                    self._faults.remove(fault)
                self._counters["faults_fired"] += 1
                return fault
        return None
