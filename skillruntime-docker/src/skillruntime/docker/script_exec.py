"""``ScriptExec``: one exec of a file script (:mod:`.file_scripts`), its input sent and its output
streamed.

An exec of a file script costs two engine requests (create, start): the script reports its exit
status as the last ``srt-rc=N`` line of its standard error, and only an exec that ended without
it (killed, or its stream cut) is inspected. Standard input, when given, is written by a thread
of its own while the output is read, so a script that exits before reading it (a refused path)
never leaves the writer blocked; the script reads exactly the announced number of bytes
(``head -c``), so no half-close of the connection is needed (none exists over TLS).

Output is kept in bounded memory: :meth:`ScriptExec.run` keeps at most ``cap`` bytes of
standard output, :meth:`ScriptExec.open` hands standard output over chunk by chunk; standard
error is cut to 64 KiB. A deadline closes the stream (``timed_out``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .engine import DockerEngine, ExecStream

__all__ = ["ScriptExec", "ScriptOutcome", "ScriptStream"]

logger = logging.getLogger(__name__)

_STDERR_CAP = 64 * 1024
_TRAILER = re.compile(rb"\n?srt-rc=(\d+)\n?$")
_EXIT_POLL_SECONDS = 10.0


@dataclass
class ScriptOutcome:
    """How a file script ended: its status, its output (as kept) and its error text."""

    status: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    timed_out: bool = False

    @property
    def message(self) -> str:
        """The last line of the error text, for an error message."""
        text = self.stderr.decode("utf-8", "replace").strip()
        return text.splitlines()[-1] if text else ""


class ScriptStream:
    """A started script: iterate :meth:`chunks` for standard output, then :meth:`finish`."""

    def __init__(
        self,
        engine: DockerEngine,
        exec_id: str,
        stream: ExecStream,
        timeout_seconds: float,
        stdin: Iterable[bytes] | None,
    ) -> None:
        self._engine = engine
        self._exec_id = exec_id
        self._stream = stream
        self._stderr = bytearray()
        self._tail = b""
        self._closed = False
        self._timed_out = False
        self._ended = False
        self._iterator = iter(stream)
        self._writer: threading.Thread | None = None
        self._write_error: BaseException | None = None
        self._timer = threading.Timer(timeout_seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()
        if stdin is not None:
            self._writer = threading.Thread(
                target=self._write, args=(stdin,), name="skillruntime-docker-stdin", daemon=True
            )
            self._writer.start()

    def _write(self, chunks: Iterable[bytes]) -> None:
        try:
            for chunk in chunks:
                if self._closed:
                    return
                self._stream.send(chunk)
        except OSError as exc:  # the script ended without reading everything
            logger.debug("a file script stopped reading its input: %s", exc)
        except BaseException as exc:  # the caller's iterator failed: the script gets less
            self._write_error = exc
            self.close()

    def _expire(self) -> None:
        self._timed_out = True
        self.close()

    def close(self) -> None:
        """Cut the stream (the exec's process sees its output closed)."""
        self._closed = True
        self._stream.close()

    def chunks(self) -> Iterator[bytes]:
        """Standard output, chunk by chunk, until the script ends."""
        try:
            for out, err in self._iterator:
                if err:
                    self._keep_error(err)
                if out:
                    yield out
        except Exception:  # the stream was cut (deadline, close) or broke
            if not self._closed:
                raise
        self._ended = True

    def _keep_error(self, chunk: bytes) -> None:
        room = _STDERR_CAP - len(self._stderr)
        if room > 0:
            self._stderr += chunk[:room]
        self._tail = (self._tail + chunk)[-64:]

    def finish(self, stdout: bytes = b"", stdout_truncated: bool = False) -> ScriptOutcome:
        """Drain what is left, end the exec's stream and read the script's status."""
        if not self._ended and not self._closed:
            for _ in self.chunks():
                pass
        self._timer.cancel()
        self._closed = True
        if self._writer is not None:
            self._stream.close()
            self._writer.join(timeout=30.0)
        self._stream.close()
        if self._write_error is not None:
            raise self._write_error
        stderr = bytes(self._stderr)
        found = _TRAILER.search(self._tail)
        if found is not None:
            status = int(found.group(1))
            cut = stderr.rfind(b"srt-rc=")
            if cut >= 0:
                stderr = stderr[:cut].rstrip(b"\n")
        elif self._timed_out:
            status = -1
        else:
            status = self._inspect()
        return ScriptOutcome(status, stdout, stderr, stdout_truncated, self._timed_out)

    def _inspect(self) -> int:
        deadline = time.monotonic() + _EXIT_POLL_SECONDS
        while True:
            info = self._engine.exec_inspect(self._exec_id)
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                return int(code)
            if time.monotonic() > deadline:
                return -1
            time.sleep(0.02)


class ScriptExec:
    """Runs file scripts in containers of one engine."""

    def __init__(self, engine: DockerEngine) -> None:
        self._engine = engine

    def open(
        self,
        container_id: str,
        argv: Sequence[str],
        *,
        user: str,
        timeout_seconds: float,
        stdin: Iterable[bytes] | None = None,
    ) -> ScriptStream:
        """Start ``argv`` as ``user`` (with ``stdin`` written to it, when given)."""
        exec_id = self._engine.exec_create(container_id, argv, user=user, stdin=stdin is not None)
        stream = self._engine.exec_stream(exec_id)
        return ScriptStream(self._engine, exec_id, stream, timeout_seconds, stdin)

    def run(
        self,
        container_id: str,
        argv: Sequence[str],
        *,
        user: str,
        timeout_seconds: float = 120.0,
        cap: int = 64 * 1024 * 1024,
        stdin: Iterable[bytes] | None = None,
    ) -> ScriptOutcome:
        """Run ``argv`` to its end, keeping at most ``cap`` bytes of standard output."""
        started = self.open(
            container_id, argv, user=user, timeout_seconds=timeout_seconds, stdin=stdin
        )
        kept = bytearray()
        truncated = False
        try:
            for chunk in started.chunks():
                room = cap - len(kept)
                if len(chunk) > room:
                    truncated = True
                kept += chunk[: max(room, 0)]
        except BaseException:
            started.close()
            with contextlib.suppress(Exception):
                started.finish()
            raise
        return started.finish(bytes(kept), truncated)
