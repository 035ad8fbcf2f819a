"""``DockerEngine``: the few Engine API calls the runtime makes, on the ``docker`` SDK's
``APIClient`` (one HTTP session per engine object, created on first use).

Every call maps the SDK's errors to :class:`~.errors.DockerEngineError` (with the engine's
status code); a missing container or volume is ``None`` or ignored where the caller asks for
it. Nothing here logs a request body, so environment values and file contents stay out of logs.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import json
import logging
import os
import posixpath
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import docker
import docker.errors
import requests

from skillruntime.core.conversations import service_key_for_url
from skillruntime.core.errors import printable

from .errors import DockerEngineError
from .security import ContainerSecurity

__all__ = [
    "DEFAULT_DOCKER_HOST",
    "DockerEngine",
    "PathStat",
    "acquire_shared_engine",
    "engine_address",
    "engine_service_key",
    "parse_time",
    "release_shared_engine",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
KEEP_ALIVE_COMMAND = ("/bin/sh", "-c", "trap 'exit 0' TERM; while sleep 3600; do :; done")
"""The container's main process: it only keeps the container running (the engine's init reaps
the command trees that exec starts)."""

_FRAME_HEADER = 8
_VERSIONS: dict[tuple[str, str], str] = {}
"""The API version negotiated per engine address and TLS settings (one ``GET /version`` per
process and engine, not per runtime object)."""
_VERSIONS_LOCK = threading.Lock()
_FRAME_CHUNK = 64 * 1024
_MODE_DIR = 1 << 31
_MODE_SYMLINK = 1 << 27
_MODE_SPECIAL = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)  # device, pipe, socket…


def engine_address(docker_host: str | None) -> str:
    """The engine's address: ``docker_host``, else ``DOCKER_HOST``, else the local socket."""
    return docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def engine_service_key(address: str) -> str:
    """The conversation identity of an engine: its address, normalised (a unix socket is named by
    its path, a TCP engine by host and port), so every node naming the engine alike shares its
    conversations."""
    if address.startswith("unix://"):
        return "unix://localhost" + posixpath.normpath("/" + address[len("unix://") :].lstrip("/"))
    if address.startswith("tcp://"):
        return service_key_for_url("http://" + address[len("tcp://") :])
    return service_key_for_url(address)


def parse_time(text: str | None) -> datetime | None:
    """An engine timestamp (RFC 3339 with nanoseconds) as an aware datetime."""
    if not text or text.startswith("0001-"):
        return None
    value = text.rstrip("Z")
    if "." in value:
        head, fraction = value.split(".", 1)
        digits = "".join(ch for ch in fraction if ch.isdigit())[:6]
        rest = fraction[len("".join(ch for ch in fraction if ch.isdigit())) :]
        value = f"{head}.{digits}{rest}"
    if text.endswith("Z"):
        value += "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class PathStat:
    """What the engine reports of one container path (``HEAD /containers/{id}/archive``)."""

    __slots__ = ("link_target", "mode", "mtime", "name", "size")

    def __init__(self, header: str) -> None:
        data = json.loads(base64.b64decode(header))
        self.name = str(data.get("name", ""))
        self.size = int(data.get("size", 0))
        self.mode = int(data.get("mode", 0))
        self.link_target = str(data.get("linkTarget") or "")
        moment = parse_time(data.get("mtime"))
        self.mtime = moment.timestamp() if moment is not None else None

    @property
    def is_directory(self) -> bool:
        return bool(self.mode & _MODE_DIR)

    @property
    def is_symlink(self) -> bool:
        return bool(self.mode & _MODE_SYMLINK)

    @property
    def is_special(self) -> bool:
        return bool(self.mode & _MODE_SPECIAL)

    @property
    def permissions(self) -> int:
        return self.mode & 0o777


def _age(created: str | None, now: str | None) -> float:
    """Seconds from ``created`` (RFC 3339) to ``now`` (an HTTP date); ``inf`` when unknown."""
    start = parse_time(created)
    if start is None or not now:
        return float("inf")
    try:
        end = email.utils.parsedate_to_datetime(now)
    except (TypeError, ValueError):
        return float("inf")
    return max(0.0, (end - start).total_seconds())


def _wire(path: str) -> bytes:
    """A path as the engine's query string carries it: its bytes (a name decoded with
    ``surrogateescape`` gets its undecodable bytes back)."""
    return path.encode("utf-8", "surrogateescape")


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, docker.errors.APIError) and exc.response is not None:
        return int(exc.response.status_code)
    return None


def _explanation(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return f"{type(exc).__name__}: {exc}"


def _endpoint(api: Any, template: str, *arguments: str) -> str:
    """The versioned URL of an engine endpoint, built as the SDK builds its own (arguments
    quoted, ``/`` and ``:`` kept)."""
    quoted = (urllib.parse.quote_plus(argument, safe="/:") for argument in arguments)
    return f"{api.base_url}/v{api.api_version}{template.format(*quoted)}"


def _post_json(api: Any, url: str, data: Mapping[str, Any], **options: Any) -> Any:
    """``POST`` a JSON body with the client's timeout (``options``: headers, stream)."""
    headers = {**options.pop("headers", {}), "Content-Type": "application/json"}
    return api.post(url, data=json.dumps(data), headers=headers, timeout=api.timeout, **options)


def _checked(response: Any) -> Any:
    """``response`` when its status is a success, else the SDK's error for it."""
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        raise docker.errors.create_api_error_from_http_exception(exc) from exc
    return response


class ExecStream:
    """The multiplexed output of one exec: iterate ``(stdout, stderr)`` pairs (one of them
    ``None``) of at most 64 KiB; :meth:`close` (from any thread) ends the iteration.

    Frames are read from the HTTP response's own buffered reader, never from the socket under
    it: bytes the engine sent together with the response headers (a command that prints and
    exits at once) sit in that buffer and would be lost to a reader of the bare socket.
    """

    def __init__(self, response: Any) -> None:
        self._response = response
        # The SDK reads hijacked exec streams the same way; urllib3 has no public name for it.
        self._reader: Any = response.raw._fp.fp  # noqa: SLF001
        raw: Any = getattr(self._reader, "raw", None)
        self._socket: Any = getattr(raw, "_sock", raw)
        with contextlib.suppress(AttributeError, OSError):
            self._socket.settimeout(None)

    def __iter__(self) -> Iterator[tuple[bytes | None, bytes | None]]:
        reader = self._reader
        while True:
            header = reader.read(_FRAME_HEADER)
            if not header or len(header) < _FRAME_HEADER:
                return
            kind = header[0]
            left = int.from_bytes(header[4:8], "big")
            while left > 0:
                chunk = reader.read(min(left, _FRAME_CHUNK))
                if not chunk:
                    return
                left -= len(chunk)
                yield (None, chunk) if kind == 2 else (chunk, None)

    def send(self, data: bytes) -> None:
        """Write ``data`` to the command's standard input (an exec created with ``stdin``)."""
        self._socket.sendall(data)

    def close(self) -> None:
        """Shut the connection down (a blocked read returns) and release the response."""
        with contextlib.suppress(AttributeError, OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


_SHARED_ENGINES: dict[tuple[str, ...], tuple[DockerEngine, int]] = {}
_SHARED_ENGINES_LOCK = threading.Lock()


def _shared_key(docker_host: str | None, api_version: str, timeout: float) -> tuple[str, ...]:
    return (
        engine_address(docker_host),
        api_version,
        repr(timeout),
        os.environ.get("DOCKER_TLS_VERIFY", ""),
        os.environ.get("DOCKER_CERT_PATH", ""),
    )


def acquire_shared_engine(
    docker_host: str | None = None,
    *,
    api_version: str = "auto",
    request_timeout_seconds: float = 60.0,
) -> DockerEngine:
    """The process's engine client for these settings, shared by every runtime built without an
    ``engine`` (one connection pool per engine and process, not per conversation: an open
    conversation then holds no socket of its own). Give it back with
    :func:`release_shared_engine`; the last release closes it."""
    key = _shared_key(docker_host, api_version, request_timeout_seconds)
    with _SHARED_ENGINES_LOCK:
        found = _SHARED_ENGINES.get(key)
        if found is None:
            engine = DockerEngine(
                docker_host,
                api_version=api_version,
                request_timeout_seconds=request_timeout_seconds,
            )
            _SHARED_ENGINES[key] = (engine, 1)
            return engine
        engine, users = found
        _SHARED_ENGINES[key] = (engine, users + 1)
        return engine


def release_shared_engine(engine: DockerEngine) -> None:
    """Give back an engine of :func:`acquire_shared_engine`; the last user's release closes it
    (an engine that is not shared is closed at once)."""
    with _SHARED_ENGINES_LOCK:
        for key, (shared, users) in _SHARED_ENGINES.items():
            if shared is engine:
                if users > 1:
                    _SHARED_ENGINES[key] = (shared, users - 1)
                    return
                del _SHARED_ENGINES[key]
                break
    engine.close()


# A forked child must not use the parent's sockets: it makes engines of its own.
os.register_at_fork(after_in_child=_SHARED_ENGINES.clear)


class DockerEngine:
    """One Docker Engine, reached at ``docker_host`` (``None``: ``DOCKER_HOST`` or the local
    socket; TLS settings come from ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH`` as the ``docker``
    CLI reads them). Nothing is contacted before the first call."""

    def __init__(
        self,
        docker_host: str | None = None,
        *,
        api_version: str = "auto",
        request_timeout_seconds: float = 60.0,
    ) -> None:
        self.address = engine_address(docker_host)
        self._api_version = api_version
        self._timeout = request_timeout_seconds
        self._api: Any = None
        self._lock = threading.Lock()
        self.requests = 0

    # ------------------------------------------------------------ plumbing

    @property
    def api(self) -> Any:
        """The SDK's ``APIClient``, created on first use; with ``api_version="auto"`` the version
        is negotiated once per process and engine (an engine replaced by an older one under the
        same address while the process runs answers 400 until the process restarts)."""
        with self._lock:
            if self._api is None:
                options = docker.utils.kwargs_from_env()
                options["base_url"] = self.address
                key = (self.address, repr(sorted((k, repr(v)) for k, v in options.items())))
                version = self._api_version
                if version == "auto":
                    with _VERSIONS_LOCK:
                        version = _VERSIONS.get(key, version)
                try:
                    self._api = docker.APIClient(version=version, timeout=self._timeout, **options)
                    if self._api_version == "auto":
                        with _VERSIONS_LOCK:
                            _VERSIONS[key] = str(self._api.api_version)
                except (
                    docker.errors.DockerException,
                    OSError,
                ) as exc:  # requests' errors are OSErrors
                    raise DockerEngineError(
                        f"cannot reach the Docker Engine at {self.address}: {_explanation(exc)}"
                    ) from exc
            return self._api

    def call(self, what: str, function: Callable[[Any], T], *, missing_ok: bool = False) -> T:
        """``function(api)`` with the SDK's errors mapped; a 404 raises unless ``missing_ok``
        (then the caller gets what ``function`` returned for it: use :meth:`maybe`)."""
        api = self.api
        self.requests += 1
        try:
            return function(api)
        except docker.errors.NotFound:
            if missing_ok:
                raise
            raise DockerEngineError(f"{what}: not found", status_code=404) from None
        except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise DockerEngineError(
                f"{what} failed: {_explanation(exc)}", status_code=_status(exc)
            ) from exc

    def maybe(self, what: str, function: Callable[[Any], T]) -> T | None:
        """``function(api)``; ``None`` when the engine answers 404."""
        try:
            return self.call(what, function, missing_ok=True)
        except docker.errors.NotFound:
            return None

    def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        with self._lock:
            api, self._api = self._api, None
        if api is not None:
            api.close()

    # ---------------------------------------------------------- containers

    def create_container(
        self,
        *,
        image: str,
        user: str | None,
        labels: Mapping[str, str],
        security: ContainerSecurity,
        volume: tuple[str, str] | None,
        environment: Mapping[str, str],
        prepare: Callable[[str], None] | None = None,
    ) -> str:
        """Create and start a container; returns its id. ``volume`` is ``(name, mount point)``.

        ``prepare(container_id)`` (archive work on the created container) runs while the engine
        starts it, in this thread; when either fails the container is removed."""
        binds = list(security.binds)
        if volume is not None:
            binds.append(f"{volume[0]}:{volume[1]}:rw")

        def create(api: Any) -> str:
            host_config = api.create_host_config(binds=binds or None, **security.host_config())
            created = api.create_container(
                image,
                command=list(KEEP_ALIVE_COMMAND),
                user=user or "",
                labels=dict(labels),
                host_config=host_config,
                environment=dict(environment) or None,
                detach=True,
            )
            return str(created["Id"])

        container_id = self.call(f"creating a container from image {image}", create)
        failures: list[BaseException] = []

        def start() -> None:
            try:
                self.start(container_id)
            except BaseException as exc:  # handed to the creating thread below
                failures.append(exc)

        starter = threading.Thread(target=start, name="skillruntime-docker-start", daemon=True)
        starter.start()
        try:
            if prepare is not None:
                prepare(container_id)
        except BaseException:
            starter.join()
            self.remove_container(container_id)
            raise
        starter.join()
        if failures:
            self.remove_container(container_id)
            raise failures[0]
        return container_id

    def start(self, container_id: str) -> None:
        """Start a created or stopped container."""
        self.call(f"starting container {container_id[:12]}", lambda api: api.start(container_id))

    def inspect(self, container_id: str) -> dict[str, Any] | None:
        """The container's inspection document, ``None`` when it does not exist."""
        found: dict[str, Any] | None = self.maybe(
            f"inspecting container {container_id[:12]}",
            lambda api: api.inspect_container(container_id),
        )
        return found

    def remove_container(self, container_id: str) -> None:
        """Remove a container, killing it first (one already gone counts as removed)."""
        self.maybe(
            f"removing container {container_id[:12]}",
            lambda api: api.remove_container(container_id, force=True, v=False),
        )

    def list_containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Containers (running or not) the engine says carry ``labels``; callers check the
        labels again themselves."""
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        found: list[dict[str, Any]] = self.call(
            "listing containers", lambda api: api.containers(all=True, filters=filters)
        )
        return found

    # ------------------------------------------------------------- volumes

    def ensure_volume(self, name: str, labels: Mapping[str, str]) -> tuple[dict[str, Any], float]:
        """The volume ``name``, created with ``labels`` when missing — one ``POST
        /volumes/create``, which answers an existing volume as it is (its own labels) — and its
        age in seconds on the engine's clock (its ``CreatedAt`` against the answer's ``Date``;
        ``inf`` when either is missing)."""

        def create(api: Any) -> tuple[dict[str, Any], float]:
            response = _post_json(
                api,
                _endpoint(api, "/volumes/create"),
                {"Name": name, "Driver": "local", "Labels": dict(labels)},
            )
            info: dict[str, Any] = _checked(response).json()
            return info, _age(info.get("CreatedAt"), response.headers.get("Date"))

        return self.call(f"creating volume {name}", create)

    def inspect_volume(self, name: str) -> dict[str, Any] | None:
        """The volume's inspection document, ``None`` when it does not exist."""
        found: dict[str, Any] | None = self.maybe(
            f"inspecting volume {name}", lambda api: api.inspect_volume(name)
        )
        return found

    def remove_volume(self, name: str) -> None:
        """Remove a volume (one already gone counts as removed)."""
        self.maybe(f"removing volume {name}", lambda api: api.remove_volume(name, force=True))

    def list_volumes(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Volumes the engine says carry ``labels``; callers check the labels again."""
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        answer: dict[str, Any] = self.call(
            "listing volumes", lambda api: api.volumes(filters=filters)
        )
        return list(answer.get("Volumes") or [])

    # ------------------------------------------------------------ archives

    def stat_path(self, container_id: str, path: str) -> PathStat | None:
        """The engine's stat of ``path`` (a final symbolic link is not followed); ``None`` when
        missing. Raises :class:`DockerEngineError` with the status for other refusals (a parent
        that is a regular file answers 500 or 400)."""

        def head(api: Any) -> PathStat | None:
            response = api.head(
                _endpoint(api, "/containers/{0}/archive", container_id),
                params={"path": _wire(path)},
                timeout=api.timeout,
            )
            return _path_stat(response, path)

        return self.call(f"stat of {printable(path)}", head)

    def get_archive(self, container_id: str, path: str, chunk_size: int) -> Iterator[bytes]:
        """The tar stream of ``path`` as the engine sends it, in chunks of ``chunk_size``."""
        stream, _ = self.call(
            f"reading {printable(path)}",
            lambda api: api.get_archive(container_id, _wire(path), chunk_size=chunk_size),
        )
        chunks: Iterator[bytes] = stream
        return chunks

    def put_archive(self, container_id: str, path: str, data: Iterator[bytes] | bytes) -> None:
        """Extract a tar stream into the existing directory ``path`` of the container."""
        ok = self.call(
            f"writing into {printable(path)}",
            lambda api: api.put_archive(container_id, _wire(path), data),
        )
        if not ok:
            raise DockerEngineError(f"the engine refused the archive for {printable(path)}")

    # ----------------------------------------------------------------- exec

    def exec_create(
        self,
        container_id: str,
        argv: Sequence[str],
        *,
        user: str | None,
        environment: Mapping[str, str] | None = None,
        stdin: bool = False,
    ) -> str:
        """Create an exec of ``argv`` in the container; returns its id."""
        created = self.call(
            "creating a command",
            lambda api: api.exec_create(
                container_id,
                list(argv),
                stdout=True,
                stderr=True,
                stdin=stdin,
                user=user or "",
                environment=dict(environment) if environment else None,
            ),
        )
        return str(created["Id"])

    def exec_stream(self, exec_id: str) -> ExecStream:
        """Start an exec; its output as an :class:`ExecStream`."""

        def start(api: Any) -> ExecStream:
            response = _post_json(
                api,
                _endpoint(api, "/exec/{0}/start", exec_id),
                {"Tty": False, "Detach": False},
                headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                stream=True,
            )
            return ExecStream(_checked(response))

        return self.call("starting a command", start)

    def exec_socket(self, exec_id: str) -> Any:
        """Start an exec with stdin attached: the raw socket of the hijacked connection."""
        return self.call("starting a command", lambda api: api.exec_start(exec_id, socket=True))

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        """The exec's state (``Running``, ``ExitCode``, ``Pid``)."""
        found: dict[str, Any] = self.call(
            "reading a command's exit code", lambda api: api.exec_inspect(exec_id)
        )
        return found


def _path_stat(response: Any, path: str) -> PathStat | None:
    """The stat an archive ``HEAD`` or ``GET`` answer carries: ``None`` for 404, a
    :class:`DockerEngineError` with the status for another refusal or a missing stat header."""
    if response.status_code == 404:
        return None
    if response.status_code >= 400:
        raise DockerEngineError(
            f"stat of {printable(path)} refused by the engine (HTTP {response.status_code})",
            status_code=response.status_code,
        )
    header = response.headers.get("X-Docker-Container-Path-Stat")
    if not header:
        raise DockerEngineError(f"the engine sent no stat for {printable(path)}")
    return PathStat(header)
