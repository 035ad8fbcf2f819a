"""A threaded HTTP double of the OpenViking 0.5.2 endpoints the Viking store uses.

Built from the JSON shapes in ``protocols/openviking.md``: the ``{status, result, error}``
envelope, ``GET /api/v1/skills`` (listing), ``GET /api/v1/skills/<name>`` with content, files
and integrity (revision computed like the server, root fallback between scopes included),
``GET /api/v1/content/download`` (octet-stream) and error envelopes (404 NOT_FOUND, 409
CONFLICT ``path_busy``, 429 RESOURCE_EXHAUSTED, 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, and
the 500 INTERNAL of a search interrupted by skills added meanwhile).

A skill changes between requests as on the real server: :meth:`VikingDouble.set_file` at any
time (after an integrity read, the revision the client just read is then stale). Hostile
behaviours (:class:`Faults`): an endless manifest, an error message echoing the credentials,
and a download that drips one byte at a time.

Identity: dev mode by default (``X-OpenViking-Account``/``X-OpenViking-User``, ``default``
otherwise); with ``api_keys`` set, ``X-API-Key`` or ``Authorization: Bearer`` is required and
chooses the identity. :class:`Faults` switches inject failures; ``downloads`` counts downloads
per file URI and ``skill_reads`` integrity reads.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from doubles._http import BackgroundHTTPServer

__all__ = ["Faults", "VikingDouble"]

AGENT_ROOT = "viking://agent/skills"
SIDE_FILES = (".abstract.md", ".overview.md")


@dataclass
class Faults:
    """Failure switches; every field is off by default and may be changed while serving."""

    busy_reads: int = 0
    """The next N integrity reads answer 409 CONFLICT path_busy (retryable)."""
    unavailable_reads: int = 0
    """The next N integrity reads answer 503 UNAVAILABLE."""
    exhausted: set[str] = field(default_factory=set)
    """Skill root URIs whose integrity reads answer 429 RESOURCE_EXHAUSTED."""
    tamper: set[str] = field(default_factory=set)
    """File URIs whose downloaded bytes have their first byte flipped (same length)."""
    declared_sizes: dict[str, int] = field(default_factory=dict)
    """File URIs whose manifest size lies (the revision is computed over the lie)."""
    change_on_download: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """File URI -> (path, new bytes): after serving that file once, the skill's file at path
    is replaced, so the revision changes mid-download."""
    die_mid_stream: set[str] = field(default_factory=set)
    """File URIs whose download sends half the body and then drops the connection."""
    serve_root: dict[str, str] = field(default_factory=dict)
    """Asked root URI -> root URI served instead (a forced scope fallback)."""
    manifest_hook: Callable[[dict[str, Any]], None] | None = None
    """Called with every integrity ``result`` before it is sent (mutate it in place)."""
    download_delay: float = 0.0
    """Seconds each download waits before sending (widens races in concurrency tests)."""
    endless_manifest: bool = False
    """Hostile: integrity reads answer 200 and stream a JSON manifest that never ends (until
    the client hangs up or 4 GiB were sent)."""
    echo_credentials: bool = False
    """Hostile: integrity reads answer 400 with a message that echoes the request's
    ``X-API-Key`` and ``Authorization`` headers."""
    drip_seconds: float = 0.0
    """Hostile: downloads send one byte, then wait this long, byte after byte."""
    manifest_drip_seconds: float = 0.0
    """Hostile: integrity reads send their (valid) answer one byte at a time, this far apart."""
    find_delay: float = 0.0
    """Seconds each ``POST /api/v1/skills/find`` waits before answering."""
    find_unavailable: bool = False
    """``POST /api/v1/skills/find`` answers 503 UNAVAILABLE (no embedder, server trouble)."""
    interrupted_finds: int = 0
    """The next N ``POST /api/v1/skills/find`` answer 500 INTERNAL "Skill search pagination did
    not advance; results are incomplete", as the real server does when skills are added while
    one search pages through its index; the same search a moment later succeeds."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def server_revision(entries: list[dict[str, Any]]) -> str:
    """The server's revision algorithm (``_skill_manifest_with_integrity``)."""
    rows = sorted(
        (
            {
                "path": entry["path"],
                "is_dir": entry["is_dir"],
                "size": entry.get("size"),
                "sha256": entry.get("sha256"),
            }
            for entry in entries
        ),
        key=lambda row: row["path"],
    )
    payload = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class VikingDouble:
    """The double: ``with VikingDouble() as viking: viking.url``…

    ``add_skill`` stores files (``SKILL.md`` required) under a root URI for an account; with
    ``summaries`` the server-generated root ``.abstract.md``/``.overview.md`` are added too.
    """

    def __init__(self, *, api_keys: dict[str, tuple[str, str]] | None = None) -> None:
        self.api_keys = api_keys
        self.faults = Faults()
        self.skills: dict[tuple[str, str], dict[str, bytes]] = {}
        self.descriptions: dict[tuple[str, str], str] = {}
        self.downloads: Counter[str] = Counter()
        self.skill_reads = 0
        self.finds = 0
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._server: BackgroundHTTPServer | None = None

    # -- content ---------------------------------------------------------------------------
    def add_skill(
        self,
        root_uri: str,
        files: dict[str, bytes],
        *,
        account: str = "default",
        description: str = "",
        summaries: bool = True,
    ) -> None:
        """Store (or replace) a skill."""
        if "SKILL.md" not in files:
            raise ValueError("a skill needs SKILL.md")
        stored = dict(files)
        if summaries:
            name = root_uri.rpartition("/")[2]
            stored[".abstract.md"] = f"name: {name}\n{description}".encode()
            stored[".overview.md"] = f"# {name}\n".encode()
        with self._lock:
            self.skills[(account, root_uri)] = stored
            self.descriptions[(account, root_uri)] = description

    def set_file(self, root_uri: str, path: str, data: bytes, *, account: str = "default") -> None:
        """Replace one file of a stored skill (changes its revision)."""
        with self._lock:
            self.skills[(account, root_uri)][path] = data

    def revision(self, root_uri: str, *, account: str = "default") -> str:
        """The current revision of a stored skill."""
        with self._lock:
            files = dict(self.skills[(account, root_uri)])
        return server_revision(self._entries(root_uri, files, {}))

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("the double is not running")
        return self._server.url

    def start(self) -> VikingDouble:
        """Serve on an ephemeral loopback port in a daemon thread."""
        double = self

        class Handler(_Handler):
            owner = double

        self._server = BackgroundHTTPServer(Handler, server_class=_QuietServer)
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()

    def __enter__(self) -> VikingDouble:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- building answers ------------------------------------------------------------------
    def _entries(
        self, root_uri: str, files: dict[str, bytes], declared: dict[str, int]
    ) -> list[dict[str, Any]]:
        dirs: set[str] = set()
        for path in files:
            parts = path.split("/")[:-1]
            for index in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:index]))
        entries: list[dict[str, Any]] = []
        for path in sorted(dirs):
            entries.append(
                {
                    "name": path.rpartition("/")[2],
                    "uri": f"{root_uri}/{path}",
                    "path": path,
                    "is_dir": True,
                    "kind": "directory",
                }
            )
        for path, data in sorted(files.items()):
            uri = f"{root_uri}/{path}"
            if path == "SKILL.md":
                kind = "definition"
            elif path in SIDE_FILES:
                kind = "summary"
            else:
                kind = "auxiliary"
            entries.append(
                {
                    "name": path.rpartition("/")[2],
                    "uri": uri,
                    "path": path,
                    "is_dir": False,
                    "kind": kind,
                    "size": declared.get(uri, len(data)),
                    "sha256": _sha(data),
                }
            )
        return entries

    def find(self, account: str, user: str, name: str, target: str | None) -> str | None:
        """The root URI the server would answer with (fallback: target, user root, agent)."""
        user_root = f"viking://user/{user}/skills"
        order = [target] if target else []
        order += [user_root, AGENT_ROOT]
        with self._lock:
            for scope in order:
                root = f"{scope}/{name}"
                root = self.faults.serve_root.get(root, root)
                if (account, root) in self.skills:
                    return root
        return None


def _words(text: str) -> list[str]:
    return [word for word in "".join(c if c.isalnum() else " " for c in text.lower()).split()]


def _envelope_error(code: str, message: str, details: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "status": "error",
        "result": None,
        "error": {"code": code, "message": message, "details": details},
        "telemetry": None,
        "profile": None,
    }


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up early (refused downloads) are expected; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    owner: VikingDouble
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _ok(self, result: Any) -> None:
        self._send_json(
            200,
            {"status": "ok", "result": result, "error": None, "telemetry": None, "profile": None},
        )

    def _error(self, status: int, code: str, message: str, details: Any = None) -> None:
        self._send_json(status, _envelope_error(code, message, details))

    def _identity(self) -> tuple[str, str] | None:
        keys = self.owner.api_keys
        if keys is None:
            return (
                self.headers.get("X-OpenViking-Account") or "default",
                self.headers.get("X-OpenViking-User") or "default",
            )
        key = self.headers.get("X-API-Key")
        auth = self.headers.get("Authorization", "")
        if key is None and auth.startswith("Bearer "):
            key = auth.removeprefix("Bearer ")
        if key is None or key not in keys:
            self._error(401, "UNAUTHENTICATED", "Missing or invalid API key")
            return None
        return keys[key]

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        with self.owner._lock:
            self.owner.requests.append((parts.path, dict(self.headers.items())))
        if parts.path == "/health":
            self._send_json(200, {"status": "ok", "healthy": True, "version": "0.5.2"})
            return
        identity = self._identity()
        if identity is None:
            return
        if parts.path == "/api/v1/skills":
            self._list(identity, query)
        elif parts.path.startswith("/api/v1/skills/"):
            self._skill(identity, parts.path.removeprefix("/api/v1/skills/"), query)
        elif parts.path == "/api/v1/content/download":
            self._download(identity, query)
        else:
            self._error(404, "NOT_FOUND", f"Not found: {parts.path}")

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        with self.owner._lock:
            self.owner.requests.append((parts.path, dict(self.headers.items())))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1 << 20))
        identity = self._identity()
        if identity is None:
            return
        if parts.path != "/api/v1/skills/find":
            self._error(404, "NOT_FOUND", f"Not found: {parts.path}")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "INVALID_ARGUMENT", "Invalid request parameters: body")
            return
        self._find(identity, body)

    def _find(self, identity: tuple[str, str], body: dict[str, Any]) -> None:
        """Semantic search stand-in: the score is the Jaccard overlap of the query's words
        with the skill's name and description words (the server uses embeddings); the user
        scope and the shared agent scope are searched, merged by score (``-score, root_uri``)
        and cut to ``limit``, as the server does."""
        owner = self.owner
        with owner._lock:
            owner.finds += 1
        if owner.faults.find_delay:
            time.sleep(owner.faults.find_delay)
        if owner.faults.find_unavailable:
            self._error(503, "UNAVAILABLE", "Embedder not configured.")
            return
        with owner._lock:
            interrupted = owner.faults.interrupted_finds > 0
            if interrupted:
                owner.faults.interrupted_finds -= 1
        if interrupted:
            self._error(500, "INTERNAL", "Internal server error")
            return
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            self._error(400, "INVALID_ARGUMENT", "query must not be empty")
            return
        limit = int(body.get("limit") or 10)
        threshold = body.get("score_threshold")
        account, user = identity
        roots = [f"viking://user/{user}/skills", AGENT_ROOT]
        words = set(_words(query))
        hits = []
        with owner._lock:
            for (acct, root), _files in sorted(owner.skills.items()):
                if acct != account or root.rpartition("/")[0] not in roots:
                    continue
                name = root.rpartition("/")[2]
                description = owner.descriptions.get((acct, root), "")
                known = set(_words(f"{name.replace('-', ' ')} {description}"))
                score = len(words & known) / len(words | known) if words | known else 0.0
                if threshold is not None and score < float(threshold):
                    continue
                hits.append(
                    {
                        "type": "skill",
                        "name": name,
                        "uri": root,
                        "root_uri": root,
                        "skill_md_uri": f"{root}/SKILL.md",
                        "description": description,
                        "tags": [],
                        "allowed_tools": [],
                        "score": score,
                    }
                )
        hits.sort(key=lambda hit: (-hit["score"], hit["root_uri"]))
        hits = hits[:limit]
        self._ok({"root_uris": roots, "skills": hits, "total": len(hits)})

    def _check_target(self, user: str, target: str | None) -> bool:
        if target is None:
            return True
        user_root = f"viking://user/{user}/skills"
        if target.startswith((user_root, AGENT_ROOT)):
            return True
        self._error(400, "INVALID_ARGUMENT", f"Unsupported skill target URI: {target}")
        return False

    def _list(self, identity: tuple[str, str], query: dict[str, str]) -> None:
        account, user = identity
        target = query.get("target_uri")
        if not self._check_target(user, target):
            return
        user_root = f"viking://user/{user}/skills"
        roots = [target] if target else [user_root, AGENT_ROOT]
        owner = self.owner
        skills = []
        with owner._lock:
            for (acct, root), _files in sorted(owner.skills.items()):
                if acct != account or root.rpartition("/")[0] not in roots:
                    continue
                name = root.rpartition("/")[2]
                skills.append(
                    {
                        "type": "skill",
                        "name": name,
                        "uri": root,
                        "root_uri": root,
                        "skill_md_uri": f"{root}/SKILL.md",
                        "description": owner.descriptions.get((acct, root), ""),
                        "tags": [],
                        "allowed_tools": [],
                    }
                )
        self._ok({"root_uris": roots, "skills": skills, "total": len(skills)})

    def _skill(self, identity: tuple[str, str], name: str, query: dict[str, str]) -> None:
        account, user = identity
        owner = self.owner
        target = query.get("target_uri")
        if not self._check_target(user, target):
            return
        integrity = query.get("include_integrity") == "true"
        root = owner.find(account, user, name, target)
        if root is None:
            resource = f"viking://user/{user}/skills/{name}"
            self._error(
                404,
                "NOT_FOUND",
                f"Skill not found: {resource}",
                {"type": "skill", "resource": resource},
            )
            return
        faults = owner.faults
        with owner._lock:
            if integrity:
                owner.skill_reads += 1
                if faults.busy_reads > 0:
                    faults.busy_reads -= 1
                    busy = True
                else:
                    busy = False
                if not busy and faults.unavailable_reads > 0:
                    faults.unavailable_reads -= 1
                    unavailable = True
                else:
                    unavailable = False
            else:
                busy = unavailable = False
            files = dict(owner.skills[(account, root)])
            description = owner.descriptions.get((account, root), "")
            declared = dict(faults.declared_sizes)
            exhausted = root in faults.exhausted
            hook = faults.manifest_hook
        if integrity and faults.echo_credentials:
            echoed = f"{self.headers.get('X-API-Key')} {self.headers.get('Authorization')}"
            self._error(400, "INVALID_ARGUMENT", f"bad request from key {echoed}", {})
            return
        if integrity and faults.endless_manifest:
            self._endless_manifest()
            return
        if busy:
            self._error(
                409,
                "CONFLICT",
                "lock acquire timed out after 0ms",
                {"resource": None, "uri": None, "conflict_type": "path_busy", "retryable": True},
            )
            return
        if unavailable:
            self._error(503, "UNAVAILABLE", "Service unavailable")
            return
        if integrity and exhausted:
            self._error(429, "RESOURCE_EXHAUSTED", "Skill file exceeds integrity size limit", {})
            return
        content = files["SKILL.md"].decode("utf-8")
        result: dict[str, Any] = {
            "type": "skill",
            "name": name,
            "uri": root,
            "root_uri": root,
            "skill_md_uri": f"{root}/SKILL.md",
            "description": description,
            "tags": [],
            "allowed_tools": [],
            "abstract": description,
            "overview": f"# {name}",
            "content": content,
            "content_sha256": _sha(content.encode("utf-8")),
        }
        entries = owner._entries(root, files, declared if integrity else {})
        if not integrity:
            for entry in entries:
                entry.pop("size", None)
                entry.pop("sha256", None)
        result["files"] = entries
        if integrity:
            result["revision"] = server_revision(entries)
            if hook is not None:
                hook(result)
        if integrity and faults.manifest_drip_seconds:
            envelope = {"status": "ok", "result": result, "error": None}
            self._drip(
                json.dumps(envelope).encode(), faults.manifest_drip_seconds, "application/json"
            )
            return
        self._ok(result)

    def _endless_manifest(self) -> None:
        entry = json.dumps(
            {"name": "f", "path": "f", "is_dir": False, "size": 1, "sha256": "0" * 64}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        sent = 0
        try:
            self.wfile.write(b'{"status":"ok","result":{"files":[')
            block = b",".join([entry] * 512) + b","
            while sent < 4 * 1024**3:
                self.wfile.write(block)
                sent += len(block)
        except OSError:  # the client hung up
            return

    def _drip(
        self, data: bytes, seconds: float, content_type: str = "application/octet-stream"
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for index in range(len(data)):
                self.wfile.write(data[index : index + 1])
                self.wfile.flush()
                time.sleep(seconds)
        except OSError:  # the client hung up
            self.close_connection = True

    def _download(self, identity: tuple[str, str], query: dict[str, str]) -> None:
        account, _user = identity
        owner = self.owner
        uri = query.get("uri", "")
        root, _, path = uri.partition("/skills/")
        root = f"{root}/skills/{path.partition('/')[0]}"
        relative = path.partition("/")[2]
        with owner._lock:
            files = owner.skills.get((account, root))
            data = files.get(relative) if files is not None else None
            faults = owner.faults
            tamper = uri in faults.tamper
            die = uri in faults.die_mid_stream
            change = faults.change_on_download.pop(uri, None)
            delay = faults.download_delay
            drip = faults.drip_seconds
            if data is not None:
                owner.downloads[uri] += 1
        if data is None:
            self._error(
                404, "NOT_FOUND", f"File not found: {uri}", {"type": "file", "resource": uri}
            )
            return
        if delay:
            time.sleep(delay)
        if tamper and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        if drip:
            self._drip(data, drip)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if die:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)
        if change is not None:
            owner.set_file(root, change[0], change[1], account=account)
