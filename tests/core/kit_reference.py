"""A small, correct host runtime the conformance kit is developed and meta-tested against.

It is deliberately independent of ``skillruntime.local`` so the kit's own tests do not depend on
the backend they are meant to judge. The broken variants in ``kit_broken.py`` subclass it and
break one contract each.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat as stat_module
import subprocess
import threading
import time
from collections.abc import Generator, Iterable, Mapping
from pathlib import Path
from typing import IO

from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    RuntimeFileNotFoundError,
    file_error_from_os_error,
)
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo, SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.runtime.spi import BaseSkillRuntime
from skillruntime.core.runtime.workspace import ConversationWorkspace, local_real_path_checker
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, UploadPolicy

__all__ = ["BoundedBuffer", "HostFileSystem", "ReferenceRuntime"]


class BoundedBuffer:
    """Keeps the head and the tail of a stream, counting what was dropped in between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head.extend(data[:room])
            data = data[room:]
        if data:
            self.tail.extend(data)
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n... [{dropped} bytes truncated] ...\n"
        return (
            bytes(self.head).decode("utf-8", "replace")
            + marker
            + bytes(self.tail).decode("utf-8", "replace")
        )


def _pump(stream: IO[bytes], buffer: BoundedBuffer) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            buffer.feed(chunk)


class HostFileSystem(SkillRuntimeFileSystem):
    """The six primitives on host paths; ``OSError`` becomes the typed error of its errno."""

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by the generator
            if stat_module.S_ISDIR(os.fstat(handle.fileno()).st_mode):
                handle.close()
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="read") from exc

        def generate() -> Generator[bytes, None, None]:
            with handle:
                while chunk := handle.read(chunk_size):
                    yield chunk

        return generate()

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        target = Path(path)
        try:
            if target.parent.exists() and not target.parent.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            os.makedirs(target.parent, exist_ok=True)
            written = 0
            with target.open("wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                    written += len(chunk)
            target.chmod(0o755 if executable else 0o644)
        except FileExistsError as exc:  # makedirs met a regular file on the way
            message = f"Cannot write {path}: Not a directory"
            raise NotADirectoryFileError(message, path=path) from exc
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="write") from exc
        return written

    def stat(self, path: str) -> FileInfo | None:
        try:
            info = Path(path).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        is_dir = stat_module.S_ISDIR(info.st_mode)
        return FileInfo(
            path=path,
            is_directory=is_dir,
            size=0 if is_dir else info.st_size,
            modified_time=info.st_mtime,
            is_executable=bool(info.st_mode & 0o100) and not is_dir,
        )

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        try:
            Path(path).stat()
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="list") from exc
        root = self.stat(path)
        if root is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {path}", path=path)
        if not root.is_directory:
            return [root]
        found: list[FileInfo] = []
        self._walk(path, depth, found)
        return sorted(found, key=lambda entry: entry.path)[: max(limit, 0)]

    def _walk(self, directory: str, depth: int, found: list[FileInfo]) -> None:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            child = f"{directory.rstrip('/')}/{entry.name}"
            info = self.stat(child)
            if info is None:
                continue
            found.append(info)
            if entry.is_dir(follow_symlinks=False) and depth > 1:
                self._walk(child, depth - 1, found)

    def delete(self, path: str) -> None:
        target = Path(path)
        try:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="delete") from exc

    def make_directory(self, path: str) -> None:
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="create directory") from exc


class ReferenceRuntime(BaseSkillRuntime):
    """Host runtime: ``bash -c`` in a new session, process-group kill, bounded output."""

    kill_grace_seconds = 2.0

    def __init__(
        self,
        *,
        conversation_id: str | None = None,
        conversations_root: str | None = None,
        work_root: str | None = None,
        in_place: bool = False,
        base_environment: Mapping[str, str] | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
    ) -> None:
        workspace = None
        if conversation_id is not None:
            assert conversations_root is not None
            workspace = ConversationWorkspace(conversations_root, conversation_id)
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        if workspace is not None:
            self._directory = workspace.directory
            self._checker = local_real_path_checker(workspace)
        else:
            assert work_root is not None, "without a conversation the reference needs a work root"
            self._directory = os.path.abspath(work_root)
        Path(self._directory).mkdir(parents=True, exist_ok=True)
        self._in_place = in_place and workspace is None
        self._fs = HostFileSystem()

    @property
    def name(self) -> str:
        return "reference"

    @property
    def default_working_directory(self) -> str:
        return self._directory

    def _skills_root(self) -> str | None:
        if self._workspace is None:
            return None if self._in_place else os.path.join(self._directory, "skills")
        return super()._skills_root()

    def _check_real_path(self, path: str) -> str:
        return self._checker(path) if self._workspace is not None else path

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._fs

    def _close_resources(self) -> None:
        return None

    def _popen(self, command: str, cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        started = time.monotonic()
        try:
            process = self._popen(request.command, working_directory, {**os.environ, **environment})
        except OSError as exc:
            raise ExecutionTransportError(f"cannot start the command: {exc.strerror}") from exc
        out = BoundedBuffer(request.max_output_bytes)
        err = BoundedBuffer(request.max_output_bytes)
        assert process.stdout is not None
        assert process.stderr is not None
        readers = [
            threading.Thread(target=_pump, args=(process.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(process.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            exit_code = process.wait(timeout=request.timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(process)
            process.wait()
            exit_code = -1
        for reader in readers:
            reader.join(self.kill_grace_seconds)
        if not any(reader.is_alive() for reader in readers):
            process.stdout.close()
            process.stderr.close()
        return SkillExecutionResult(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            duration_seconds=time.monotonic() - started,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )
