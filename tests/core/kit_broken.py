"""Runtimes that each break one contract of DESIGN §3, to prove the kit notices.

Every class subclasses the correct ``ReferenceRuntime`` and changes as little as possible.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import subprocess
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Loaded by test_conformance_meta under this name (tests are not importable packages).
from skillruntime_tests_kit_reference import (  # type: ignore[import-not-found]
    HostFileSystem,
    ReferenceRuntime,
)

from skillruntime.core.errors import RuntimeFileError, RuntimeFileNotFoundError
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import (
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.scoped import ScopedFileSystem
from skillruntime.core.runtime.workspace import ConversationWorkspace, PathScope
from skillruntime.core.skills.files import SkillFile, UploadPolicy

__all__ = ["BROKEN_RUNTIMES", "TIMEOUT_TESTS"]

logger = logging.getLogger(__name__)


class NoTreeKill(ReferenceRuntime):
    """Kills only the direct child on timeout; grandchildren survive."""

    kill_grace_seconds = 0.3

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        process.kill()


class TimeoutExitCodeNotMinusOne(ReferenceRuntime):
    """Reports the signal exit status instead of -1 on timeout."""

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        result = super()._run(request, working_directory, environment)
        if result.timed_out:
            return result.model_copy(update={"exit_code": -9})
        return result


class DropsOutputOnTimeout(ReferenceRuntime):
    """Throws the output away when a command times out."""

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        result = super()._run(request, working_directory, environment)
        if result.timed_out:
            return result.model_copy(update={"stdout": "", "stderr": ""})
        return result


class UnboundedOutput(ReferenceRuntime):
    """Ignores ``max_output_bytes``."""

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        unbounded = request.model_copy(update={"max_output_bytes": 1 << 30})
        return super()._run(unbounded, working_directory, environment)


class MergesStderr(ReferenceRuntime):
    """Sends stderr into stdout."""

    def _popen(self, command: str, cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            ["bash", "-c", f"exec 2>&1; {command}"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        return process


class StdinLeftOpen(ReferenceRuntime):
    """Gives the command a stdin pipe that is never closed."""

    def _popen(self, command: str, cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )


class LosesUnicode(ReferenceRuntime):
    """Decodes output as Latin-1."""

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        result = super()._run(request, working_directory, environment)
        return result.model_copy(
            update={
                "stdout": result.stdout.encode("utf-8").decode("latin-1"),
                "stderr": result.stderr.encode("utf-8").decode("latin-1"),
            }
        )


class RequestLosesToSkillEnvironment(ReferenceRuntime):
    """Applies skill configs over the request's environment."""

    def effective_environment(self, request_environment: Mapping[str, str]) -> dict[str, str]:
        merged = {**self._base_environment, **request_environment}
        for environment in self._skill_environment.values():
            merged.update(environment)
        return merged


class RequestEnvironmentLeaks(ReferenceRuntime):
    """Keeps a request's environment for every later command."""

    def effective_environment(self, request_environment: Mapping[str, str]) -> dict[str, str]:
        self._base_environment.update(request_environment)
        return super().effective_environment(request_environment)


class LogsEnvironment(ReferenceRuntime):
    """Logs the environment of every command at debug level."""

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        logger.debug("running %r with environment %s", request.command, environment)
        return super()._run(request, working_directory, environment)


class ForgetsSkillEnvironment(ReferenceRuntime):
    """Never injects prepared skills' environment into later commands."""

    def _activate(self, skill_name: str, config: SkillRuntimeConfig) -> None:
        return None


class ReBootstraps(ReferenceRuntime):
    """Ignores every cache: each prepare uploads and bootstraps again."""

    def _is_ready(self, target: str) -> bool:
        return False

    def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        with self._lock:
            self._prepared.clear()
        return super()._prepare_one(skill, config)


class ResumeReuploads(ReferenceRuntime):
    """Does not recognise copies prepared by an earlier runtime object."""

    def _is_ready(self, target: str) -> bool:
        return False


class CachesFailedBootstrap(ReferenceRuntime):
    """Marks a copy ready before its bootstrap ran, so a failure is never retried."""

    def _bootstrap(self, prepared: Skill, config: SkillRuntimeConfig) -> None:
        self._mark_ready(prepared.base_path, digest="")  # the reference runtime keeps no digest
        super()._bootstrap(prepared, config)


class ReturnsCachedObjects(ReferenceRuntime):
    """Returns the very same Skill object on a repeated prepare."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._objects: dict[str, Skill] = {}

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        prepared = super().prepare(request)
        return [self._objects.setdefault(skill.base_path, skill) for skill in prepared]


class WrongSkillsRoot(ReferenceRuntime):
    """Prepares skills outside ``<workspace>/skills``."""

    def _skills_root(self) -> str | None:
        assert self._workspace is not None
        return posixpath.join(self._workspace.directory, "prepared")


class _UnlockedDict(dict[Any, threading.Lock]):
    def setdefault(self, key: Any, default: threading.Lock | None = None) -> threading.Lock:
        return threading.Lock()


class UnlockedPrepare(ReferenceRuntime):
    """Has no per-skill lock: concurrent prepares of one skill all bootstrap."""

    kit_allowed_errors = frozenset({"error:SkillPrepareError"})  # copies trample each other

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._prepare_locks = _UnlockedDict()


class CloseNotIdempotent(ReferenceRuntime):
    """Raises on a second close."""

    kit_allowed_errors = frozenset({"error:RuntimeError"})

    def close(self) -> None:
        if self._closed:
            raise RuntimeError("already closed")
        super().close()


class FileSystemIgnoresClose(ReferenceRuntime):
    """Hands out a file system that keeps working after close."""

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        return ScopedFileSystem(
            self._raw_file_system(),
            workspace=self._workspace,
            check_real_path=self._check_real_path,
        )


class ExecutesAfterClose(ReferenceRuntime):
    """Still runs commands after close."""

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        assert self._workspace is not None
        cwd = self._workspace.resolve(request.working_directory or self._workspace.directory)
        cwd = self._check_real_path(cwd)
        return self._run(request, cwd, self.effective_environment(request.environment))


class _RelativeEscapeWorkspace(ConversationWorkspace):
    def resolve(self, path: str) -> str:
        if not path.startswith("/"):
            return posixpath.normpath(posixpath.join(self.directory, path))
        return super().resolve(path)


class AllowsDotDot(ReferenceRuntime):
    """Checks absolute paths but lets relative ``../`` paths leave the workspace.

    It has no symlink resolution either (its suite runs with ``resolves_symlinks`` off), so
    nothing behind the lexical check catches the escape.
    """

    kit_resolves_symlinks = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        assert self._workspace is not None
        self._workspace = _RelativeEscapeWorkspace(
            self._workspace.conversations_root, self._workspace.conversation_id
        )

    def _check_real_path(self, path: str) -> str:
        return path


class _TouchFirstScope(PathScope):
    """Path rules that stat the joined path on the backend before checking it."""

    def __init__(
        self, inner: SkillRuntimeFileSystem, workspace: ConversationWorkspace, **rules: Any
    ) -> None:
        super().__init__(workspace=workspace, **rules)
        self._backend = inner
        self._directory = workspace.directory

    def path(self, path: str) -> str:
        self._backend.stat(posixpath.normpath(posixpath.join(self._directory, path)))
        return super().path(path)


class _TouchFirstFileSystem(ScopedFileSystem):
    def __init__(
        self,
        inner: SkillRuntimeFileSystem,
        *,
        workspace: ConversationWorkspace | None,
        is_closed: Callable[[], bool],
        check_real_path: Callable[[str], str] | None,
    ) -> None:
        super().__init__(
            inner, workspace=workspace, is_closed=is_closed, check_real_path=check_real_path
        )
        assert workspace is not None
        self._scope = _TouchFirstScope(
            inner, workspace, is_closed=is_closed, check_real_path=check_real_path
        )


class _WorkspaceDeletingFileSystem(ScopedFileSystem):
    def delete(self, path: str) -> None:
        self._inner.delete(self._scope.path(path))


class DeletesWorkspace(ReferenceRuntime):
    """Lets a caller delete the conversation workspace itself."""

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        with self._lock:
            if self._file_system is None:
                self._file_system = _WorkspaceDeletingFileSystem(
                    self._raw_file_system(),
                    workspace=self._workspace,
                    is_closed=lambda: self._closed,
                    check_real_path=self._check_real_path,
                )
            return self._file_system


class TouchesBackendBeforeScoping(ReferenceRuntime):
    """Asks the backend about a path before checking that it is inside the workspace."""

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        with self._lock:
            if self._file_system is None:
                self._file_system = _TouchFirstFileSystem(
                    self._raw_file_system(),
                    workspace=self._workspace,
                    is_closed=lambda: self._closed,
                    check_real_path=self._check_real_path,
                )
            return self._file_system


class FollowsSymlinksInWorkspace(ReferenceRuntime):
    """Checks paths lexically only, so a symlink carries operations out."""

    def _check_real_path(self, path: str) -> str:
        return path


class IgnoresUploadPolicy(ReferenceRuntime):
    """Uploads ``.git/``, ``.env`` and credentials."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            **kwargs,
            upload_policy=UploadPolicy(
                excluded_directories=(), excluded_file_names=(), excluded_file_prefixes=()
            ),
        )


class UploadFollowsSymlinks(ReferenceRuntime):
    """Copies the skill directory following symbolic links."""

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(skill.base_path, target, symlinks=False, ignore=_policy_ignore)


def _policy_ignore(directory: str, names: list[str]) -> list[str]:
    policy = UploadPolicy()
    return [
        n
        for n in names
        if not (os.path.isdir(os.path.join(directory, n)) and policy.allows_directory(n))
        and not (os.path.isfile(os.path.join(directory, n)) and policy.allows_file(n))
    ]


class _NoExecBitFileSystem(HostFileSystem):
    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        return super().write_stream(path, chunks, executable=False)


class DropsExecutableBit(ReferenceRuntime):
    """Writes every file with mode 0644."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _NoExecBitFileSystem()


class _NoLimitFileSystem(HostFileSystem):
    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes:
        return b"".join(self.read_stream(path))


class IgnoresReadLimit(ReferenceRuntime):
    """Reads whole files whatever ``max_bytes`` says."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _NoLimitFileSystem()


class _OneChunkFileSystem(HostFileSystem):
    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        return super().read_stream(path, 1 << 30)


class UnboundedReadChunks(ReferenceRuntime):
    """Streams a file as one chunk of its whole size."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _OneChunkFileSystem()


class _DirectDownloadFileSystem(ScopedFileSystem):
    def _download_to_path(self, path: str, destination: Path) -> Path:
        destination.parent.mkdir(parents=True, exist_ok=True)
        with destination.open("wb") as handle:
            for chunk in self.read_stream(path):
                handle.write(chunk)
        return destination


class NonAtomicDownload(ReferenceRuntime):
    """Downloads straight into the destination."""

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        with self._lock:
            if self._file_system is None:
                self._file_system = _DirectDownloadFileSystem(
                    self._raw_file_system(),
                    workspace=self._workspace,
                    is_closed=lambda: self._closed,
                    check_real_path=self._check_real_path,
                )
            return self._file_system


class _FlatListingFileSystem(HostFileSystem):
    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return super().list_directory(path, 1, limit)


class ListingIgnoresDepth(ReferenceRuntime):
    """Lists only direct children whatever the depth."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _FlatListingFileSystem()


class _LineListingFileSystem(HostFileSystem):
    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return [
            entry.model_copy(update={"path": _as_one_line(entry.path)})
            for entry in super().list_directory(path, depth, limit)
        ]


def _as_one_line(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "replace").split("\n", 1)[0]


class ListsNamesLineByLine(ReferenceRuntime):
    """Lists names as a line-wise UTF-8 listing reads them: cut at a newline, undecodable bytes
    replaced (the paths name files that do not exist)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _LineListingFileSystem()


class _UntypedErrorsFileSystem(HostFileSystem):
    """Reports every failure with the two oldest classes only, as text."""

    def _untyped(self, operation: Callable[[], Any], path: str) -> Any:
        try:
            return operation()
        except RuntimeFileNotFoundError as exc:
            raise RuntimeFileNotFoundError(str(exc), path=path) from exc
        except RuntimeFileError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        stream: Generator[bytes, None, None] = self._untyped(
            lambda: super(_UntypedErrorsFileSystem, self).read_stream(path, chunk_size), path
        )
        return stream

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        written: int = self._untyped(
            lambda: super(_UntypedErrorsFileSystem, self).write_stream(
                path, chunks, executable=executable
            ),
            path,
        )
        return written

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        listed: list[FileInfo] = self._untyped(
            lambda: super(_UntypedErrorsFileSystem, self).list_directory(path, depth, limit), path
        )
        return listed

    def delete(self, path: str) -> None:
        self._untyped(lambda: super(_UntypedErrorsFileSystem, self).delete(path), path)

    def make_directory(self, path: str) -> None:
        self._untyped(lambda: super(_UntypedErrorsFileSystem, self).make_directory(path), path)


class UntypedFileErrors(ReferenceRuntime):
    """Raises ``RuntimeFileNotFoundError``/``RuntimeFileError`` for every file failure."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fs = _UntypedErrorsFileSystem()


class RelativePathsAgainstTheProcess(ReferenceRuntime):
    """Without a conversation, hands relative file paths to the backend unresolved (so they
    land in the process's working directory, not the runtime's default directory)."""

    kit_conversation_mode = False
    # Files land elsewhere, so commands and the kit's own helpers then miss them.
    kit_allowed_errors = frozenset(
        {"error:RuntimeFileNotFoundError", "error:ExecutionTransportError", "error:RuntimeError"}
    )

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        return ScopedFileSystem(self._raw_file_system(), is_closed=lambda: self._closed)


class CopiesInsteadOfInPlace(ReferenceRuntime):
    """Claims to prepare in place but copies skills under the work root."""

    kit_conversation_mode = False
    kit_prepares_in_place = True

    def __init__(self, **kwargs: Any) -> None:
        kwargs["in_place"] = False
        super().__init__(**kwargs)


TIMEOUT_TESTS = frozenset(
    {
        "test_timeout_kills_the_whole_process_tree",
        "test_timeout_keeps_partial_output",
        "test_bootstrap_timeout_fails_prepare",
    }
)

BROKEN_RUNTIMES: dict[type[ReferenceRuntime], frozenset[str]] = {
    NoTreeKill: frozenset({"test_timeout_kills_the_whole_process_tree"}),
    TimeoutExitCodeNotMinusOne: frozenset(
        {"test_timeout_kills_the_whole_process_tree", "test_timeout_keeps_partial_output"}
    ),
    DropsOutputOnTimeout: frozenset(
        {"test_timeout_keeps_partial_output", "test_bootstrap_timeout_fails_prepare"}
    ),
    UnboundedOutput: frozenset(
        {
            "test_stdout_beyond_the_cap_keeps_head_and_tail",
            "test_stderr_is_bounded_separately",
            "test_memory_stays_bounded_whatever_the_command_prints",
        }
    ),
    MergesStderr: frozenset(
        {
            "test_stdout_and_stderr_are_separate",
            "test_stderr_is_bounded_separately",
            "test_unicode_round_trips_through_command_env_and_output",
            "test_timeout_keeps_partial_output",
        }
    ),
    StdinLeftOpen: frozenset({"test_stdin_is_empty"}),
    LosesUnicode: frozenset(
        {
            "test_unicode_round_trips_through_command_env_and_output",
            "test_skill_environment_is_visible_to_later_commands",
        }
    ),
    RequestLosesToSkillEnvironment: frozenset(
        {"test_environment_precedence_base_then_skill_then_request"}
    ),
    LogsEnvironment: frozenset({"test_environment_values_never_appear_in_logs_or_errors"}),
    DeletesWorkspace: frozenset({"test_the_workspace_itself_cannot_be_deleted"}),
    RequestEnvironmentLeaks: frozenset({"test_request_environment_applies_to_one_command_only"}),
    ForgetsSkillEnvironment: frozenset(
        {
            "test_skill_environment_is_visible_to_later_commands",
            "test_environment_precedence_base_then_skill_then_request",
            "test_resumed_runtime_sees_files_and_keeps_prepared_skills",
        }
    ),
    ReBootstraps: frozenset(
        {
            "test_preparing_same_content_again_bootstraps_nothing",
            "test_same_content_from_another_directory_reuses_the_prepared_copy",
            "test_bootstrap_failure_caches_nothing_and_next_prepare_retries",
            "test_resumed_runtime_sees_files_and_keeps_prepared_skills",
        }
    ),
    ResumeReuploads: frozenset({"test_resumed_runtime_sees_files_and_keeps_prepared_skills"}),
    CachesFailedBootstrap: frozenset(
        {"test_bootstrap_failure_caches_nothing_and_next_prepare_retries"}
    ),
    ReturnsCachedObjects: frozenset(
        {"test_prepare_returns_new_objects_and_leaves_inputs_untouched"}
    ),
    WrongSkillsRoot: frozenset({"test_prepared_copy_lives_under_workspace_skills_named_by_digest"}),
    UnlockedPrepare: frozenset({"test_concurrent_prepare_of_one_skill_bootstraps_once"}),
    CloseNotIdempotent: frozenset({"test_close_is_idempotent"}),
    FileSystemIgnoresClose: frozenset({"test_every_operation_after_close_raises_runtime_closed"}),
    ExecutesAfterClose: frozenset({"test_every_operation_after_close_raises_runtime_closed"}),
    AllowsDotDot: frozenset({"test_dot_dot_escape_is_refused_before_any_backend_call"}),
    TouchesBackendBeforeScoping: frozenset(
        {
            "test_dot_dot_escape_is_refused_before_any_backend_call",
            "test_absolute_path_outside_is_refused_before_any_backend_call",
        }
    ),
    FollowsSymlinksInWorkspace: frozenset({"test_symlink_cannot_carry_a_file_operation_out"}),
    IgnoresUploadPolicy: frozenset(
        {"test_upload_policy_excludes_symlinks_git_env_and_credentials"}
    ),
    UploadFollowsSymlinks: frozenset(
        {"test_upload_policy_excludes_symlinks_git_env_and_credentials"}
    ),
    DropsExecutableBit: frozenset(
        {"test_prepared_copy_keeps_executable_bit", "test_upload_keeps_the_executable_bit"}
    ),
    IgnoresReadLimit: frozenset({"test_read_over_the_limit_raises_file_too_large"}),
    UnboundedReadChunks: frozenset({"test_large_file_streams_in_bounded_chunks"}),
    NonAtomicDownload: frozenset({"test_failed_download_leaves_no_partial_file"}),
    ListingIgnoresDepth: frozenset({"test_list_directory_honours_depth_and_limit"}),
    ListsNamesLineByLine: frozenset(
        {
            "test_grep_matches_the_default_implementation",
            "test_glob_matches_the_default_implementation",
        }
    ),
    UntypedFileErrors: frozenset(
        {
            "test_reading_a_directory_is_an_is_a_directory_error",
            "test_a_path_through_a_regular_file_is_not_a_directory",
            "test_writes_into_an_unwritable_directory_are_permission_denied",
        }
    ),
    CopiesInsteadOfInPlace: frozenset({"test_prepare_in_place_returns_the_source_directory"}),
    RelativePathsAgainstTheProcess: frozenset(
        {
            "test_relative_paths_resolve_under_the_workspace",
            "test_missing_paths_raise_file_not_found_with_its_code",
            "test_stat_of_missing_file_and_directory",
            "test_binary_round_trip_of_all_byte_values",
            "test_upload_keeps_the_executable_bit",
            "test_list_directory_honours_depth_and_limit",
            "test_list_files_returns_regular_files_only",
            "test_concurrent_commands_on_one_runtime",
            "test_commands_and_file_system_share_one_boundary",
            "test_a_failing_command_is_run_once",
            "test_conversations_are_isolated",
            "test_explicit_working_directory_relative_and_absolute",
            "test_writes_into_an_unwritable_directory_are_permission_denied",
        }
    ),
}
"""Each broken runtime and exactly the kit tests it must fail."""
