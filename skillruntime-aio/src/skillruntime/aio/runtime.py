"""``AioSandboxSkillRuntime``: skill commands and files in an AIO Sandbox service someone else runs.

The runtime talks HTTP to the service (one ``httpx.Client``); it never creates, stops or
cleans up the service. Two modes:

* **Conversation** (``conversation_id``): the workspace is ``<conversations_root>/<id>`` on the
  service, created on first use; it is the default working directory and scopes every file
  operation and working directory lexically (the service's shell can still reach any path the
  ``gem`` user can). Skills are prepared under ``<workspace>/skills/<name>-<digest12>/``.
* **Shared root** (no conversation): skills are prepared under ``remote_root``; commands run in
  its parent by default. Paths are not confined.

The service's disk is the state: no conversation record is kept (an optional store holds only
the lease of ``exclusive=True``). A prepared copy is complete
when its ready marker ``.<name>-<digest12>.ready`` exists next to it, so a new runtime object —
in this process or on another node — checks that with one call and uploads nothing when it is
there. Preparing uploads one archive and unpacks it with one command.

:meth:`close` closes the command sessions this runtime opened and its HTTP connections; it
deletes no workspace and no prepared copy.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections.abc import Mapping, Sequence

from skillruntime.core.conversations import ConversationStore, service_key_for_url
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ExclusiveRuntimeMixin,
    workspace_guard,
)
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.errors import ExecutionTransportError, SkillPrepareError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.spi import BaseSkillRuntime, ready_marker_path
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .archive import build_skill_archive, unpack_command
from .client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, AioClient
from .commands import CommandMode, CommandRunner, CommandSpec
from .errors import AioSandboxError
from .files import AioFileSystem
from .first_use import FirstUse
from .options import DEFAULT_CONVERSATIONS_ROOT, DEFAULT_REMOTE_ROOT, validate_base_url
from .script import WrapperOutcome

__all__ = [
    "PREPARE_TIMEOUT",
    "AioSandboxSkillRuntime",
    "checked_remote_root",
    "command_cwd",
    "execution_result",
    "unpack_error",
    "unpack_failure",
    "unpack_spec",
    "upload_failure",
]

logger = logging.getLogger(__name__)

PREPARE_TIMEOUT = 600.0
"""Seconds the unpack command of a skill archive may take."""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def checked_remote_root(remote_root: str) -> str:
    """``remote_root`` normalised; it must be absolute and not ``/``."""
    if not remote_root.startswith("/") or remote_root.rstrip("/") == "":
        raise ValueError("remote_root must be an absolute path on the service other than /")
    return posixpath.normpath(remote_root)


def command_cwd(default_directory: str, working_directory: str) -> str:
    """The absolute working directory of a command on the service."""
    return posixpath.normpath(posixpath.join(default_directory, working_directory))


def execution_result(
    outcome: WrapperOutcome, request: SkillExecutionRequest, cwd: str, started: float
) -> SkillExecutionResult:
    """The SPI result of a wrapper run (``started``: its ``time.monotonic()``); a missing
    working directory raises ``ExecutionTransportError``."""
    if outcome.missing_cwd:
        raise ExecutionTransportError(f"Working directory does not exist: {cwd}")
    cap = request.max_output_bytes
    return SkillExecutionResult(
        exit_code=outcome.exit_code,
        stdout=_decode(outcome.stdout),
        stderr=_decode(outcome.stderr),
        timed_out=outcome.timed_out,
        duration_seconds=time.monotonic() - started,
        stdout_truncated=outcome.stdout_size > cap,
        stderr_truncated=outcome.stderr_size > cap,
    )


def upload_failure(skill: Skill, exc: AioSandboxError) -> SkillPrepareError:
    """The error of a skill archive the service refused."""
    return SkillPrepareError(
        f"Uploading skill '{skill.name}' to the AIO Sandbox failed: {exc}", skill_name=skill.name
    )


def unpack_spec(command: str) -> CommandSpec:
    """The command that unpacks a staged skill archive (see :func:`.archive.unpack_command`)."""
    return CommandSpec(
        command=command, cwd="/", environment={}, timeout=PREPARE_TIMEOUT, cap=64 * 1024
    )


def unpack_error(skill: Skill, exc: ExecutionTransportError) -> SkillPrepareError:
    """The error of an unpack command that could not run."""
    return SkillPrepareError(
        f"Unpacking skill '{skill.name}' on the AIO Sandbox failed: {exc}", skill_name=skill.name
    )


def unpack_failure(skill: Skill, outcome: WrapperOutcome) -> SkillPrepareError | None:
    """The error of an unpack command that failed; ``None`` when it succeeded."""
    if outcome.exit_code == 0 and not outcome.timed_out:
        return None
    detail = _decode(outcome.stderr).strip()[-500:]
    return SkillPrepareError(
        f"Unpacking skill '{skill.name}' on the AIO Sandbox failed "
        f"(exit code {outcome.exit_code}): {detail}",
        skill_name=skill.name,
        exit_code=outcome.exit_code,
        output_tail=detail,
        timed_out=outcome.timed_out,
    )


class AioSandboxSkillRuntime(ExclusiveRuntimeMixin, BaseSkillRuntime):
    """Runs skills in an existing AIO Sandbox service; see the module docs for the modes.

    ``token`` is sent as ``Authorization: Bearer`` and ``api_key`` as ``X-AIO-API-Key``.
    ``command_api`` forces ``bash`` (``/v1/bash/exec``) or ``shell`` (``/v1/shell/exec``);
    ``auto`` detects it once. ``temp_root`` is a directory on the service for staged uploads and
    per-command output files. ``client`` replaces the HTTP client (its owner closes it).

    ``conversation_store`` (a store or a URL; one built from a URL is closed with the runtime) and
    ``exclusive=True`` make every prepare, execute and file operation hold the conversation's
    lease, so processes and nodes sharing the service's workspace take turns (see
    :mod:`skillruntime.core.conversations.exclusive`). The lease key is the service URL and the
    conversation id: every node must name the service by the same URL. The store keeps only the
    lease (no record: the service's disk is the state, so sweeps do not remove AIO workspaces).
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: str | None = None,
        api_key: str | None = None,
        conversation_id: str | None = None,
        conversations_root: str = DEFAULT_CONVERSATIONS_ROOT,
        remote_root: str = DEFAULT_REMOTE_ROOT,
        base_environment: Mapping[str, str] | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        retry_attempts: int = 3,
        command_api: CommandMode = "auto",
        temp_root: str = "/tmp",
        client: AioClient | None = None,
        conversation_store: ConversationStore | str | None = None,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ) -> None:
        workspace = (
            ConversationWorkspace(conversations_root, conversation_id)
            if conversation_id is not None
            else None
        )
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        self._remote_root = checked_remote_root(remote_root)
        self._owns_client = client is None
        self._client = client or AioClient(
            validate_base_url(base_url),
            token=token,
            api_key=api_key,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry_attempts=retry_attempts,
        )
        self._runner = CommandRunner(self._client, mode=command_api, temp_root=temp_root)
        self._files = AioFileSystem(self._client, self._runner)
        self._default_directory = (
            workspace.directory if workspace else posixpath.dirname(self._remote_root)
        )
        self._root_ready = False
        self._root_lock = threading.Lock()
        self._first_use = FirstUse()
        self._guard, self._owned_store = workspace_guard(
            self.name,
            workspace,
            conversation_store,
            service_key=service_key_for_url(validate_base_url(base_url)),
            exclusive=exclusive,
            lease_ttl_seconds=lease_ttl_seconds,
            lease_wait_seconds=lease_wait_seconds,
            activity_interval_seconds=activity_interval_seconds,
            register=False,
        )

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "aio"

    @property
    def default_working_directory(self) -> str:
        return self._default_directory

    @property
    def client(self) -> AioClient:
        """The HTTP client (its :attr:`~AioClient.request_count` counts requests)."""
        return self._client

    @property
    def command_api(self) -> str:
        """``bash`` or ``shell``: the command API in use (detected on first use)."""
        return self._runner.mode

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        if request.skills:
            self._ensure_root()
        return super().prepare(request)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        self._ensure_root()
        return super().get_file_system()

    # ----------------------------------------------------------------- hooks

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        cwd = command_cwd(self._default_directory, working_directory)
        make_dirs = () if self._root_ready else (self._default_directory,)
        started = time.monotonic()
        spec = CommandSpec(
            command=request.command,
            cwd=cwd,
            environment=environment,
            timeout=request.timeout_seconds,
            cap=request.max_output_bytes,
            make_dirs=make_dirs,
        )
        if make_dirs:  # the command creates the workspace: the runtime's first use, maybe
            with self._first_use.attach(self._audit_fields()):
                outcome = self._runner.run(spec)
        else:
            outcome = self._runner.run(spec)
        result = execution_result(outcome, request, cwd, started)
        self._root_ready = True
        return result

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._files

    def _close_resources(self) -> None:
        try:
            self._runner.close()
        finally:
            try:
                if self._owns_client:
                    self._client.close()
            finally:
                if self._owned_store is not None:
                    self._owned_store.close()

    def _skills_root(self) -> str | None:
        if self._workspace is not None:
            return self._workspace.skills_directory
        return self._remote_root

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Upload one ``.tar.gz`` of the skill and unpack it with one command."""
        archive, size = build_skill_archive(files)
        staging = self._runner.staging_path(".tar.gz")
        try:
            try:
                self._client.upload(staging, archive, size, idempotent=True, read_timeout=600.0)
            except AioSandboxError as exc:
                raise upload_failure(skill, exc) from exc
        finally:
            archive.close()
        try:
            outcome = self._runner.run(unpack_spec(unpack_command(staging, target)))
        except ExecutionTransportError as exc:
            raise unpack_error(skill, exc) from exc
        failure = unpack_failure(skill, outcome)
        if failure is not None:
            raise failure
        logger.debug("uploaded skill %s as one %d-byte archive", skill.name, size)

    def _mark_ready(self, target: str, *, digest: str) -> None:
        self._files.write_marker(ready_marker_path(target), "ok\n")

    # --------------------------------------------------------------- helpers

    def _ensure_root(self) -> None:
        """Create the workspace (or the shared skills root) on first use: one command."""
        if self._root_ready:
            return
        with self._root_lock:
            if self._root_ready:
                return
            root = self._workspace.directory if self._workspace else self._remote_root
            with self._first_use.attach(self._audit_fields()):
                self._files.make_directory(root)
            self._root_ready = True
