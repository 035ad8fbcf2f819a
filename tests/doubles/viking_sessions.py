"""A threaded HTTP double of the OpenViking 0.5.2 session endpoints, with faults.

Built from the server's request models and routes (``openviking/server/routers/sessions.py`` of
the 0.5.2 wheel, read as a reference, never imported; ``docs/viking.md`` "Sessions"):

* ``POST /api/v1/sessions`` ``{session_id?}`` creates; ``GET /api/v1/sessions/{id}`` answers 404
  ``NOT_FOUND`` for a missing session, else its details with ``message_count`` and
  ``pending_tokens``; ``DELETE`` removes it;
* ``POST /{id}/messages`` and ``/{id}/messages/batch`` (at most 100 messages) create the session
  on first add; each message needs ``role`` and ``content`` or ``parts``; a ``tool`` part's
  ``skill_uri`` (like ``tool_uri``) must be a ``viking://`` URI of a public scope, otherwise
  400 ``INVALID_URI``; messages are stored with an ``id``, ``created_at`` and their
  ``turn_id``/``message_kind``;
* ``GET /{id}/context`` lists the messages of archives whose memory extraction has not ended,
  then the live ones (404 ``NOT_FOUND`` for a missing session);
* ``POST /{id}/commit`` archives the live messages before answering and answers
  ``{session_id, status: "accepted", task_id, archive_uri, archived: true}`` (``"skipped"`` with
  ``reason: "no_messages"`` when there is nothing to archive).

:class:`SessionFaults` injects failures: writes that answer 500 before storing, writes that
store and then answer 500 or answer late (the client's timeout fires after the server acted),
commits that answer 500, 503 or late. ``requests`` records ``(method, path)`` of every request.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from doubles._http import BackgroundHTTPServer

__all__ = ["SessionFaults", "VikingSessionsDouble"]

_PREFIX = "/api/v1/sessions"
_PUBLIC_SCOPES = ("resources", "user", "agent", "session", "memory", "skills")


@dataclass
class SessionFaults:
    """Failure switches (off by default; may change while serving)."""

    write_errors: int = 0
    """The next N message writes answer 500 INTERNAL without storing anything."""
    lost_write_answers: int = 0
    """The next N message writes store their messages, then answer 500 INTERNAL."""
    write_delay: float = 0.0
    """Seconds a message write waits after storing, before answering."""
    commit_errors: int = 0
    """The next N commits answer 500 INTERNAL without archiving."""
    commit_unavailable: int = 0
    """The next N commits answer 503 UNAVAILABLE without archiving (the server did nothing)."""
    commit_delay: float = 0.0
    """Seconds a commit waits before archiving and answering."""
    extraction_seconds: float = 0.0
    """How long an archive's memory extraction runs after its commit answered; meanwhile its
    messages still show in the context, as on the server (non-terminal archives)."""


@dataclass
class _Session:
    messages: list[dict[str, Any]] = field(default_factory=list)
    archives: list[list[dict[str, Any]]] = field(default_factory=list)
    extracted_at: list[float] = field(default_factory=list)
    """When each archive's memory extraction ends (monotonic seconds)."""

    def context(self) -> list[dict[str, Any]]:
        """The context's messages: those of archives still being extracted, then the live."""
        now = time.monotonic()
        pending = [
            message
            for archive, done in zip(self.archives, self.extracted_at, strict=True)
            if done > now
            for message in archive
        ]
        return [*pending, *self.messages]


def _tokens(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps([message["parts"] for message in messages])) // 4


def _invalid_uri(value: str) -> str | None:
    """Why ``value`` is not a public ``viking://`` URI (as the server's check), or ``None``."""
    if not value.startswith("viking://"):
        return f"Invalid Viking URI: {value!r} must start with viking://"
    scope = value.removeprefix("viking://").split("/", 1)[0]
    if scope not in _PUBLIC_SCOPES:
        return f"Invalid scope '{scope}'"
    return None


class VikingSessionsDouble:
    """``with VikingSessionsDouble() as server: server.url``; ``sessions`` maps
    ``(account, user, session id)`` to the stored messages and archives."""

    def __init__(self) -> None:
        self.faults = SessionFaults()
        self.sessions: dict[tuple[str, str, str], _Session] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server: BackgroundHTTPServer | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("the double is not running")
        return self._server.url

    def messages(self, session_id: str, *, account: str = "default", user: str = "default") -> Any:
        """The live messages of a session (a copy)."""
        with self.lock:
            session = self.sessions.get((account, user, session_id))
            return json.loads(json.dumps(session.messages)) if session else []

    def archives(self, session_id: str, *, account: str = "default", user: str = "default") -> Any:
        """The archived message lists of a session (a copy)."""
        with self.lock:
            session = self.sessions.get((account, user, session_id))
            return json.loads(json.dumps(session.archives)) if session else []

    def start(self) -> VikingSessionsDouble:
        double = self

        class Handler(_Handler):
            owner = double

        self._server = BackgroundHTTPServer(Handler, server_class=_QuietServer)
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

    def __enter__(self) -> VikingSessionsDouble:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that time out and hang up are expected; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    owner: VikingSessionsDouble
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    # -- answers -------------------------------------------------------------------------
    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up waiting

    def _ok(self, result: Any) -> None:
        self._send(200, {"status": "ok", "result": result, "error": None, "telemetry": None})

    def _error(self, status: int, code: str, message: str) -> None:
        self._send(
            status,
            {
                "status": "error",
                "result": None,
                "error": {"code": code, "message": message, "details": None},
                "telemetry": None,
            },
        )

    # -- routing -------------------------------------------------------------------------
    def _route(self, method: str) -> tuple[tuple[str, str], str, str] | None:
        path = urlsplit(self.path).path
        with self.owner.lock:
            self.owner.requests.append((method, path))
        identity = (
            self.headers.get("X-OpenViking-Account") or "default",
            self.headers.get("X-OpenViking-User") or "default",
        )
        if not path.startswith(_PREFIX):
            self._error(404, "NOT_FOUND", f"Not found: {path}")
            return None
        rest = path.removeprefix(_PREFIX).strip("/")
        session_id, _, action = rest.partition("/")
        return identity, unquote(session_id), action

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return None

    def do_GET(self) -> None:
        routed = self._route("GET")
        if routed is None:
            return
        (account, user), session_id, action = routed
        with self.owner.lock:
            session = self.owner.sessions.get((account, user, session_id))
            messages = list(session.messages) if session else []
            context = session.context() if session else []
        if action == "" and session_id:
            if session is None:
                self._error(404, "NOT_FOUND", f"Session {session_id} not found")
                return
            self._ok(
                {
                    "session_id": session_id,
                    "uri": f"viking://session/{user}/{session_id}",
                    "message_count": len(messages),
                    "pending_tokens": _tokens(messages),
                    "commit_count": len(session.archives),
                }
            )
        elif action == "context":
            if session is None:  # the server reads the context with auto_create=False
                self._error(404, "NOT_FOUND", f"Session {session_id} not found")
                return
            self._ok({"latest_archive_overview": "", "messages": context})
        else:
            self._error(404, "NOT_FOUND", f"Not found: {self.path}")

    def do_DELETE(self) -> None:
        routed = self._route("DELETE")
        if routed is None:
            return
        (account, user), session_id, _ = routed
        with self.owner.lock:
            self.owner.sessions.pop((account, user, session_id), None)
        self._ok({"session_id": session_id})

    def do_POST(self) -> None:
        routed = self._route("POST")
        if routed is None:
            return
        (account, user), session_id, action = routed
        body = self._body()
        if not isinstance(body, dict):
            self._error(400, "INVALID_ARGUMENT", "Invalid request parameters: body")
            return
        key = (account, user, session_id)
        if not session_id:
            new_id = str(body.get("session_id") or uuid.uuid4())
            with self.owner.lock:
                self.owner.sessions.setdefault((account, user, new_id), _Session())
            self._ok({"session_id": new_id, "uri": f"viking://session/{user}/{new_id}"})
        elif action in ("messages", "messages/batch"):
            requested = body.get("messages") if action == "messages/batch" else [body]
            self._add(key, requested)
        elif action == "commit":
            self._commit(key)
        else:
            self._error(404, "NOT_FOUND", f"Not found: {self.path}")

    def _add(self, key: tuple[str, str, str], requested: Any) -> None:
        if not isinstance(requested, list) or len(requested) > 100:
            self._error(400, "INVALID_ARGUMENT", "Invalid request parameters: body.messages")
            return
        stored: list[dict[str, Any]] = []
        for message in requested:
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                self._error(400, "INVALID_ARGUMENT", "Invalid request parameters: body.role")
                return
            parts = message.get("parts")
            if parts is None:
                if message.get("content") is None:
                    self._error(
                        400, "INVALID_ARGUMENT", "Either 'content' or 'parts' must be provided"
                    )
                    return
                parts = [{"type": "text", "text": message["content"]}]
            for part in parts:
                for name in ("skill_uri", "tool_uri"):
                    value = part.get(name) if isinstance(part, dict) else None
                    reason = _invalid_uri(value) if value else None
                    if reason is not None:
                        self._error(400, "INVALID_URI", f"{name}: {reason}")
                        return
            entry = {
                "id": f"msg_{uuid.uuid4().hex}",
                "role": message["role"],
                "parts": parts,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            for optional in ("turn_id", "message_kind"):
                if message.get(optional) is not None:
                    entry[optional] = message[optional]
            stored.append(entry)
        faults = self.owner.faults
        with self.owner.lock:
            if faults.write_errors > 0:
                faults.write_errors -= 1
                fail_before = True
            else:
                fail_before = False
        if fail_before:
            self._error(500, "INTERNAL", "Internal server error")
            return
        with self.owner.lock:
            session = self.owner.sessions.setdefault(key, _Session())
            session.messages.extend(stored)
            count, pending = len(session.messages), _tokens(session.messages)
            lose = faults.lost_write_answers > 0
            if lose:
                faults.lost_write_answers -= 1
            delay = faults.write_delay
        if delay:
            time.sleep(delay)
        if lose:
            self._error(500, "INTERNAL", "Internal server error")
            return
        self._ok(
            {
                "session_id": key[2],
                "message_count": count,
                "added": len(stored),
                "pending_tokens": pending,
            }
        )

    def _commit(self, key: tuple[str, str, str]) -> None:
        faults = self.owner.faults
        with self.owner.lock:
            failing = faults.commit_errors > 0
            if failing:
                faults.commit_errors -= 1
            unavailable = not failing and faults.commit_unavailable > 0
            if unavailable:
                faults.commit_unavailable -= 1
            delay = faults.commit_delay
        if failing:
            self._error(500, "INTERNAL", "Internal server error")
            return
        if unavailable:
            self._error(503, "UNAVAILABLE", "Service unavailable")
            return
        if delay:
            time.sleep(delay)
        with self.owner.lock:
            session = self.owner.sessions.setdefault(key, _Session())
            archived = bool(session.messages)
            if archived:
                session.archives.append(session.messages)
                session.extracted_at.append(time.monotonic() + faults.extraction_seconds)
                session.messages = []
        if not archived:
            self._ok(
                {
                    "session_id": key[2],
                    "status": "skipped",
                    "task_id": None,
                    "archived": False,
                    "reason": "no_messages",
                }
            )
            return
        self._ok(
            {
                "session_id": key[2],
                "status": "accepted",
                "task_id": uuid.uuid4().hex,
                "archive_uri": f"viking://session/{key[1]}/{key[2]}/history/archive_001",
                "archived": True,
            }
        )
