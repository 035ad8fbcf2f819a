"""execd API routes of the double (reached through a sandbox endpoint).

JSON keys are snake_case; errors are flat ``{code, message}``. ``POST /command`` answers a
``text/event-stream`` whose frames are bare JSON objects each followed by ``\\n\\n`` (no
``data:`` prefix), exactly as execd writes them. After the terminal event the stream stays open
for the registry's ``tail_delay`` (execd's ``EXECD_API_GRACE_SHUTDOWN``, 1 s by default) before
it ends. A client that hangs up during that grace period makes execd take a SIGPIPE when it
ends the stream, and execd relays every signal it receives to the process group of **every
command then running in the sandbox**: the double does the same (counter ``grace_hangups``).
When the sandbox is removed (deleted, killed, expired), its execd dies with it: every stream
still open, a lingering one included, is cut at once, with no terminal event and no chunked
terminator (the client's httpx raises ``RemoteProtocolError``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import posixpath
import re
import select
import shutil
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from doubles._http import BodyError
from doubles._multipart import (
    MultipartError,
    boundary_of,
    disposition_params,
    parse_multipart,
)
from doubles.opensandbox import sandboxfs as sfs
from doubles.opensandbox.commands import (
    Chunk,
    CommandRecord,
    CommandTable,
    SpawnError,
    now_ms,
)
from doubles.opensandbox.exchange import Exchange
from doubles.opensandbox.registry import Registry, Sandbox
from doubles.opensandbox.sandboxfs import ApiError

log = logging.getLogger(__name__)


class StreamAbortedError(Exception):
    """The response stream was cut on purpose (fault injection): close the socket now."""


def _frame(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def _output_bytes(chunk: Chunk) -> bytes:
    """The bytes of one output chunk: the pieces of one line concatenate to exactly the frame
    ``_frame({"type": kind, "text": line, "timestamp": ...})``."""
    if chunk.start and chunk.end:
        return _frame({"type": chunk.kind, "text": chunk.text, "timestamp": now_ms()})
    data = json.dumps(chunk.text, ensure_ascii=False)[1:-1].encode()
    if chunk.start:
        data = json.dumps({"type": chunk.kind})[:-1].encode() + b', "text": "' + data
    if chunk.end:
        data += f'", "timestamp": {now_ms()}}}'.encode() + b"\n\n"
    return data


def _json_body(ex: Exchange) -> Any:
    try:
        return ex.body.json()
    except (ValueError, BodyError) as exc:
        raise ApiError(400, "INVALID_REQUEST_BODY", f"invalid request body: {exc}") from exc


def ping(ex: Exchange) -> None:
    """``GET /ping`` → 200 with an empty body."""
    ex.send_empty(200)


# -- commands ----------------------------------------------------------------------------


def run_command(ex: Exchange, registry: Registry, sandbox: Sandbox) -> None:
    """``POST /command``: validation errors are 400 JSON; everything else is the event stream."""
    body = _json_body(ex)
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
    assert sandbox.commands is not None
    table = sandbox.commands
    try:
        record = table.start(body)
    except SpawnError as exc:
        registry.count("commands")
        writer = ex.start_chunked(200, "text/event-stream")
        writer.write(
            _frame(
                {
                    "type": "error",
                    "timestamp": now_ms(),
                    "error": {
                        "ename": "CommandExecError",
                        "evalue": str(exc),
                        "traceback": [str(exc)],
                    },
                }
            )
        )
        writer.finish()
        return
    registry.count("commands")
    stream_record(ex, registry, table, record)


def stream_record(
    ex: Exchange, registry: Registry, table: CommandTable, record: CommandRecord
) -> None:
    """Write the event stream of a started command (or session run) until it ends."""
    writer = ex.start_chunked(200, "text/event-stream")
    try:
        writer.write(_frame({"type": "init", "text": record.id, "timestamp": now_ms()}))
        if record.background:
            writer.write(
                _frame({"type": "execution_complete", "execution_time": 0, "timestamp": now_ms()})
            )
            writer.finish()
            return
        fault = registry.take_fault(
            ("drop_after_terminal", "no_terminal", "drop_mid_stream"), plane="execd"
        )
        last_write = time.monotonic()
        output_events = 0
        inside_event = False
        for item in table.stream_lines(record):
            if table.gone.is_set():
                raise StreamAbortedError("the sandbox was removed: its execd is gone")
            if (
                fault is not None
                and fault.kind == "drop_mid_stream"
                and output_events >= fault.after_events
            ):
                raise StreamAbortedError("stream dropped before the terminal event")
            if item is None:
                if not inside_event and time.monotonic() - last_write >= registry.ping_interval:
                    writer.write(_frame({"type": "ping", "text": "pong", "timestamp": now_ms()}))
                    last_write = time.monotonic()
                continue
            writer.write(_output_bytes(item))
            inside_event = not item.end
            if item.end:
                output_events += 1
            last_write = time.monotonic()
        if fault is not None and fault.kind == "drop_mid_stream":
            raise StreamAbortedError("stream dropped before the terminal event")
        if table.gone.is_set():
            raise StreamAbortedError("the sandbox was removed: its execd is gone")
        if fault is not None and fault.kind == "no_terminal":
            writer.finish()
            return
        code = record.exit_code
        if code == 0:
            elapsed = int(((record.finished_at or time.time()) - record.started_at) * 1000)
            terminal: dict[str, Any] = {
                "type": "execution_complete",
                "execution_time": elapsed,
                "timestamp": now_ms(),
            }
        else:
            terminal = {
                "type": "error",
                "timestamp": now_ms(),
                "error": {
                    "ename": "CommandExecError",
                    "evalue": str(code),
                    "traceback": [record.end_text or f"exit status {code}"],
                },
            }
        writer.write(_frame(terminal))
        if fault is not None and fault.kind == "drop_after_terminal":
            raise StreamAbortedError("stream dropped after the terminal event")
        if registry.tail_delay > 0 and table.gone.wait(registry.tail_delay):
            raise StreamAbortedError("the sandbox was removed during the grace period")
        if _client_hung_up(ex):
            # execd's write of the stream's end raises SIGPIPE, which it relays to every
            # running command of the sandbox.
            if table.relay_signal(signal.SIGPIPE):
                registry.count("grace_hangups")
            raise BrokenPipeError("client hung up during the grace period")
        writer.finish()
    except (BrokenPipeError, ConnectionResetError, StreamAbortedError):
        # The client vanished (or a fault, or the sandbox's removal, cut the stream): like a
        # cancelled request context in execd, the foreground command dies with it.
        table.kill(record)
        raise
    finally:
        if not record.background:
            record.done.wait(5.0)
            table.forget_output(record)


def _client_hung_up(ex: Exchange) -> bool:
    """Whether the client closed its end of the connection (EOF or reset pending).

    A client that is still reading the response sends nothing (HTTP/1.1 has no request before
    the response ended), so anything but EOF or a reset means it is still there."""
    connection = ex.handler.connection
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (BlockingIOError, OSError, ValueError):
        return False


def create_session(ex: Exchange, sandbox: Sandbox) -> None:
    """``POST /session`` ``{cwd?}`` → ``{session_id}``."""
    body = _json_body(ex)
    if body is not None and not isinstance(body, dict):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
    assert sandbox.sessions is not None
    session = sandbox.sessions.create((body or {}).get("cwd"))
    ex.send_json(200, {"session_id": session.id})


def run_in_session(ex: Exchange, registry: Registry, sandbox: Sandbox, session_id: str) -> None:
    """``POST /session/{id}/run`` ``{command, cwd?, timeout?}`` → the event stream."""
    body = _json_body(ex)
    assert sandbox.sessions is not None
    assert sandbox.commands is not None
    record = sandbox.sessions.run(session_id, body)
    registry.count("commands")
    stream_record(ex, registry, sandbox.commands, record)


def delete_session(ex: Exchange, sandbox: Sandbox, session_id: str) -> None:
    """``DELETE /session/{id}``."""
    assert sandbox.sessions is not None
    sandbox.sessions.delete(session_id)
    ex.send_empty(200)


def command_status(ex: Exchange, sandbox: Sandbox, command_id: str) -> None:
    """``GET /command/status/{id}``."""
    assert sandbox.commands is not None
    record = sandbox.commands.get(command_id)
    if record is None:
        raise ApiError(404, "RUNTIME_ERROR", f"command {command_id} not found")
    ex.send_json(200, record.status_json())


def command_logs(ex: Exchange, sandbox: Sandbox, command_id: str) -> None:
    """``GET /command/{id}/logs?cursor=N`` (byte cursor; next one in a response header)."""
    assert sandbox.commands is not None
    raw = ex.param("cursor")
    try:
        cursor = int(raw) if raw else 0
    except ValueError as exc:
        raise ApiError(400, "INVALID_REQUEST_BODY", "cursor must be an integer") from exc
    data, next_cursor = sandbox.commands.background_logs(command_id, cursor)
    ex.send_bytes(
        200,
        data,
        "text/plain; charset=utf-8",
        {"EXECD-COMMANDS-TAIL-CURSOR": str(next_cursor)},
    )


def interrupt(ex: Exchange, sandbox: Sandbox) -> None:
    """``DELETE /command?id=``: SIGTERM, then SIGKILL, to the process group."""
    command_id = ex.param("id")
    if not command_id:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter: id")
    assert sandbox.commands is not None
    sandbox.commands.interrupt(command_id)
    ex.send_empty(200)


# -- files -------------------------------------------------------------------------------


class _StagedFile:
    """Sink writing one uploaded file part to a staging file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self._fh = open(path, "wb")  # noqa: SIM115

    def write(self, data: bytes) -> None:
        self.size += len(data)
        self._fh.write(data)

    def close(self) -> None:
        self._fh.close()


class _MemoryPart:
    """Sink collecting a small part (metadata JSON) in memory, refusing more than 64 KiB."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data.extend(data)
        if len(self.data) > 64 * 1024:
            raise MultipartError("metadata part too large")

    def close(self) -> None:
        return None


def upload(ex: Exchange, registry: Registry, sandbox: Sandbox) -> None:
    """``POST /files/upload``: ``metadata``/``file`` part pairs, streamed to staging files and
    committed only when the whole body parsed and every file had its metadata."""
    registry.count("upload_requests")
    try:
        boundary = boundary_of(ex.header("Content-Type") or "")
    except MultipartError as exc:
        raise ApiError(400, "INVALID_FILE", str(exc)) from exc
    metas: list[_MemoryPart] = []
    files: list[_StagedFile] = []
    staging = sandbox.staging / f"upload-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)

    def open_part(headers: dict[str, str]) -> Any:
        params = disposition_params(headers.get("content-disposition", ""))
        name = params.get("name")
        if name == "metadata":
            part = _MemoryPart()
            metas.append(part)
            return part
        if name == "file":
            staged = _StagedFile(staging / str(len(files)))
            files.append(staged)
            return staged
        return _MemoryPart()

    try:
        try:
            parse_multipart(ex.body, boundary, open_part)
            ex.body.drain()  # the epilogue after the closing boundary
        except (MultipartError, BodyError) as exc:
            raise ApiError(400, "INVALID_FILE", f"invalid multipart body: {exc}") from exc
        if not files:
            raise ApiError(400, "INVALID_FILE", "no file part in the request")
        if len(metas) != len(files):
            raise ApiError(
                400,
                "INVALID_FILE_METADATA",
                f"metadata count {len(metas)} does not match file count {len(files)}",
            )
        plans: list[tuple[sfs.Resolved, int | None, Any, Any, _StagedFile]] = []
        for meta_part, staged in zip(metas, files, strict=True):
            try:
                meta = json.loads(bytes(meta_part.data))
            except ValueError as exc:
                raise ApiError(400, "INVALID_FILE_METADATA", f"invalid metadata: {exc}") from exc
            if not isinstance(meta, dict) or not isinstance(meta.get("path"), str):
                raise ApiError(400, "INVALID_FILE_METADATA", "metadata without a path")
            target = sfs.resolve(sandbox, meta["path"])
            target.require_writable()
            plans.append(
                (
                    target,
                    sfs.digits_to_mode(meta.get("mode")),
                    meta.get("owner"),
                    meta.get("group"),
                    staged,
                )
            )
        for target, mode, owner, group, staged in plans:
            # execd's wording: MkdirAll of the parent, then OpenFile of the target.
            parent = posixpath.dirname(target.sandbox_path)
            try:
                sfs.mkdir_all(target.host.parent)
            except OSError as exc:
                raise ApiError(
                    500,
                    "RUNTIME_ERROR",
                    f"error creating target directory {parent}. mkdir {parent}: "
                    f"{sfs.go_reason(exc)}",
                ) from exc
            try:
                if target.host.is_dir():
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                os.replace(staged.path, target.host)
                if mode is not None:
                    target.host.chmod(mode)
            except OSError as exc:
                where = target.sandbox_path
                raise ApiError(
                    500,
                    "RUNTIME_ERROR",
                    f"error opening destination file {where}. open {where}: {sfs.go_reason(exc)}",
                ) from exc
            sfs.apply_owner(target.host, owner, group)
            registry.count("uploaded_files")
            registry.count("uploaded_bytes", staged.size)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ex.send_empty(200)


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def download(ex: Exchange, sandbox: Sandbox) -> None:
    """``GET /files/download?path=`` with optional ``Range`` or line ``offset``/``limit``."""
    target = sfs.resolve(sandbox, ex.param("path") or "")
    try:
        target.host.stat()
    except FileNotFoundError as exc:
        raise sfs.not_found(target.sandbox_path) from exc
    except OSError as exc:  # execd's handleFileError: only ENOENT is a 404
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            f"error accessing file: open {target.sandbox_path}: {sfs.go_reason(exc)}",
        ) from exc
    if target.host.is_dir():
        raise ApiError(400, "INVALID_FILE", f"{target.sandbox_path} is a directory")
    offset_raw, limit_raw = ex.param("offset"), ex.param("limit")
    range_header = ex.header("Range")
    if offset_raw is not None or limit_raw is not None:
        _download_lines(ex, target, offset_raw, limit_raw)
        return
    size = target.host.stat().st_size
    start, end, status = 0, size - 1, 200
    headers = {"Accept-Ranges": "bytes"}
    if range_header:
        match = _RANGE.match(range_header.strip())
        if not match or (not match.group(1) and not match.group(2)):
            raise ApiError(416, "INVALID_REQUEST_BODY", f"invalid range: {range_header}")
        first, last = match.group(1), match.group(2)
        if first:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        else:
            start = max(size - int(last), 0)
        if start >= size or start > end:
            ex.extra_headers["Content-Range"] = f"bytes */{size}"
            raise ApiError(416, "INVALID_REQUEST_BODY", f"range not satisfiable: {range_header}")
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    length = max(end - start + 1, 0)
    out = ex.start_fixed(status, "application/octet-stream", length, headers)
    with open(target.host, "rb") as fh:
        fh.seek(start)
        left = length
        while left > 0:
            block = fh.read(min(64 * 1024, left))
            if not block:
                break
            out.write(block)
            left -= len(block)
    out.flush()


def _download_lines(
    ex: Exchange, target: sfs.Resolved, offset_raw: str | None, limit_raw: str | None
) -> None:
    try:
        offset = int(offset_raw) if offset_raw else 1
        limit = int(limit_raw) if limit_raw else None
    except ValueError as exc:
        raise ApiError(400, "INVALID_REQUEST_BODY", "offset and limit must be integers") from exc
    if offset < 1 or (limit is not None and limit < 0):
        raise ApiError(400, "INVALID_REQUEST_BODY", "offset must be >= 1 and limit >= 0")
    lines: list[bytes] = []
    with open(target.host, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if number < offset:
                continue
            if limit is not None and len(lines) >= limit:
                break
            lines.append(line.rstrip(b"\n"))
    ex.send_bytes(200, b"\n".join(lines), "text/plain; charset=utf-8")


def info(ex: Exchange, sandbox: Sandbox) -> None:
    """``GET /files/info?path=a&path=b`` → ``{path: FileInfo}``; any missing path is a 404."""
    paths = ex.params("path")
    if not paths:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter: path")
    out: dict[str, Any] = {}
    for raw in paths:
        target = sfs.resolve(sandbox, raw)
        try:
            out[raw] = sfs.file_info(target.sandbox_path, target.host)
        except FileNotFoundError as exc:
            raise sfs.not_found(target.sandbox_path) from exc
        except OSError as exc:  # ENOTDIR, EACCES…: not "not exist" for Go's os.IsNotExist
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error accessing file: lstat {target.sandbox_path}: {sfs.go_reason(exc)}",
            ) from exc
    ex.send_json(200, out)


def delete_files(ex: Exchange, sandbox: Sandbox) -> None:
    """``DELETE /files?path=...``: a missing file is fine; a directory is a 500."""
    for raw in ex.params("path"):
        target = sfs.resolve(sandbox, raw)
        if not target.host.exists() and not target.host.is_symlink():
            continue
        target.require_writable()
        if target.host.is_dir() and not target.host.is_symlink():
            raise ApiError(500, "RUNTIME_ERROR", f"remove {target.sandbox_path}: is a directory")
        try:
            target.host.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error removing file {raw}. remove {target.sandbox_path}: {sfs.go_reason(exc)}",
            ) from exc
    ex.send_empty(200)


def delete_dirs(ex: Exchange, sandbox: Sandbox) -> None:
    """``DELETE /directories?path=...``: recursive, missing is fine."""
    for raw in ex.params("path"):
        target = sfs.resolve(sandbox, raw)
        if not target.host.exists() and not target.host.is_symlink():
            continue
        target.require_writable()
        if target.sandbox_path in sfs.PRIVATE_ROOTS:
            for child in list(target.host.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
            continue
        if target.host.is_dir() and not target.host.is_symlink():
            shutil.rmtree(target.host, ignore_errors=True)
        else:
            target.host.unlink(missing_ok=True)
    ex.send_empty(200)


def make_dirs(ex: Exchange, sandbox: Sandbox) -> None:
    """``POST /directories`` ``{path: {mode, owner, group}}``."""
    body = _json_body(ex)
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
    for raw, raw_spec in body.items():
        spec = raw_spec if isinstance(raw_spec, dict) else {}
        target = sfs.resolve(sandbox, raw)
        target.require_writable()
        if target.host.exists() and not target.host.is_dir():
            raise ApiError(500, "RUNTIME_ERROR", f"mkdir {target.sandbox_path}: not a directory")
        sfs.make_dirs(target.host, sfs.digits_to_mode(spec.get("mode")), target.sandbox_path)
        sfs.apply_owner(target.host, spec.get("owner"), spec.get("group"))
    ex.send_empty(200)


def list_directory(ex: Exchange, sandbox: Sandbox) -> None:
    """``GET /directories/list?path=&depth=1``."""
    target = sfs.resolve(sandbox, ex.param("path") or "")
    if not target.host.exists():
        raise sfs.not_found(target.sandbox_path)
    if not target.host.is_dir():
        raise ApiError(400, "INVALID_REQUEST_BODY", f"{target.sandbox_path} is not a directory")
    raw_depth = ex.param("depth")
    try:
        depth = int(raw_depth) if raw_depth else None
    except ValueError as exc:
        raise ApiError(400, "INVALID_REQUEST_BODY", "depth must be an integer") from exc
    ex.send_json(200, sfs.walk_entries(target, depth))


def search(ex: Exchange, sandbox: Sandbox) -> None:
    """``GET /files/search?path=&pattern=``: basename glob over files, recursively."""
    target = sfs.resolve(sandbox, ex.param("path") or "")
    if not target.host.is_dir():
        raise sfs.not_found(target.sandbox_path)
    ex.send_json(200, sfs.search(target, ex.param("pattern") or "**"))


def move(ex: Exchange, sandbox: Sandbox) -> None:
    """``POST /files/mv`` ``[{src, dest}]``: a missing source is a 404, an existing
    destination a 500."""
    body = _json_body(ex)
    if not isinstance(body, list):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON list")
    for item in body:
        if not isinstance(item, dict) or "src" not in item or "dest" not in item:
            raise ApiError(400, "INVALID_REQUEST_BODY", "each entry needs src and dest")
        src = sfs.resolve(sandbox, str(item["src"]))
        dest = sfs.resolve(sandbox, str(item["dest"]))
        if not src.host.exists() and not src.host.is_symlink():
            raise sfs.not_found(src.sandbox_path)
        src.require_writable()
        dest.require_writable()
        if dest.host.exists():
            raise ApiError(500, "RUNTIME_ERROR", f"rename: {dest.sandbox_path} already exists")
        dest.host.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src.host, dest.host)
    ex.send_empty(200)


def permissions(ex: Exchange, sandbox: Sandbox) -> None:
    """``POST /files/permissions`` ``{path: {mode, owner, group}}``."""
    body = _json_body(ex)
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
    for raw, raw_spec in body.items():
        spec = raw_spec if isinstance(raw_spec, dict) else {}
        target = sfs.resolve(sandbox, raw)
        if not target.host.exists():
            raise sfs.not_found(target.sandbox_path)
        target.require_writable()
        mode = sfs.digits_to_mode(spec.get("mode"))
        if mode is not None:
            target.host.chmod(mode)
        sfs.apply_owner(target.host, spec.get("owner"), spec.get("group"))
    ex.send_empty(200)


def replace(ex: Exchange, sandbox: Sandbox) -> None:
    """``POST /files/replace?verbose=`` ``{path: {old, new}}``."""
    body = _json_body(ex)
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
    verbose = (ex.param("verbose") or "false").lower() == "true"
    result: dict[str, Any] = {}
    for raw, spec in body.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("old"), str):
            raise ApiError(400, "INVALID_REQUEST_BODY", "each entry needs old and new")
        target = sfs.resolve(sandbox, raw)
        if not target.host.is_file():
            raise sfs.not_found(target.sandbox_path)
        target.require_writable()
        text = target.host.read_text("utf-8", "surrogateescape")
        count = text.count(spec["old"]) if spec["old"] else 0
        if count:
            target.host.write_text(
                text.replace(spec["old"], str(spec.get("new") or "")), "utf-8", "surrogateescape"
            )
        result[raw] = {"replacedCount": count}
    if verbose:
        ex.send_json(200, result)
    else:
        ex.send_empty(200)


def metrics(ex: Exchange) -> None:
    """``GET /metrics``: host figures in execd's shape."""
    cpus = os.cpu_count() or 1
    mem_total = 0
    mem_avail = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_total = int(line.split()[1]) // 1024
                elif line.startswith("MemAvailable:"):
                    mem_avail = int(line.split()[1]) // 1024
    except OSError:
        pass
    ex.send_json(
        200,
        {
            "cpu_count": cpus,
            "cpu_used_pct": 0.0,
            "mem_total_mib": mem_total,
            "mem_used_mib": max(mem_total - mem_avail, 0),
            "timestamp": now_ms(),
        },
    )
