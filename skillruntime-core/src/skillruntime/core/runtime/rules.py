"""The rules every runtime base class follows, free of I/O so sync and async bases share them.

:class:`~skillruntime.core.runtime.spi.BaseSkillRuntime` and
:class:`~skillruntime.core.runtime.async_spi.AsyncBaseSkillRuntime` both build on these functions:
the working directory of a command, environment precedence, the content digest of a skill, the cache
key of a prepared skill, the steps of one preparation (:func:`preparation_plan`, a generator that
*asks* for each I/O step and is driven by the base classes' loop), the prepared-copy record and its
ready marker, and the errors a failed step turns into.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RuntimeClosedError, SkillPrepareError, SkillRuntimeError
from ..models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillRuntimeConfig,
)
from ..skills.files import (
    SkillFile,
    UploadPolicy,
    iter_skill_files,
    prepared_copy_digest,
    prepared_directory_name,
    skill_digest,
)
from .workspace import ConversationWorkspace, resolve_against

__all__ = [
    "BOOTSTRAP_OUTPUT_TAIL",
    "Bootstrap",
    "CheckReady",
    "MarkReady",
    "PlaceFiles",
    "PreparationStep",
    "PrepareKey",
    "PreparedSkill",
    "ScannedSkill",
    "audit_fields",
    "bootstrap_failure",
    "bootstrap_requests",
    "bootstrap_transport_failure",
    "closed_error",
    "command_directory",
    "merge_environment",
    "place_failure",
    "preparation_plan",
    "prepare_key",
    "ready_marker_path",
    "scan_skill",
]

BOOTSTRAP_OUTPUT_TAIL = 2000
"""Characters of a failing bootstrap command's output kept in :class:`SkillPrepareError`."""

PrepareKey = tuple[str, str, str]
"""Cache key of a prepared skill: name, content digest, config JSON."""


class PreparedSkill:
    """A skill prepared in a runtime: where its copy lives and the config it was prepared with."""

    __slots__ = ("base_path", "config", "digest")

    def __init__(self, base_path: str, digest: str, config: SkillRuntimeConfig) -> None:
        self.base_path = base_path
        self.digest = digest
        self.config = config


def ready_marker_path(prepared_directory: str) -> str:
    """Runtime path of the marker written next to a prepared copy once it is complete."""
    parent, name = posixpath.split(prepared_directory.rstrip("/"))
    return posixpath.join(parent, f".{name}.ready")


def closed_error(runtime_name: str) -> RuntimeClosedError:
    """The error every operation of a closed runtime raises."""
    return RuntimeClosedError(f"The {runtime_name} runtime is closed")


def command_directory(
    working_directory: str | None,
    default_working_directory: str,
    workspace: ConversationWorkspace | None,
    check_real_path: Callable[[str], str],
) -> str:
    """The directory a command runs in: the request's or the default, scoped to ``workspace``.

    With a workspace the path is resolved inside it (escapes raise
    :class:`~skillruntime.core.errors.WorkspaceEscapeError`) and passed through
    ``check_real_path`` before any backend call; without one a relative path resolves against
    ``default_working_directory``, as relative file paths do.
    """
    cwd = working_directory or default_working_directory
    if workspace is not None:
        return check_real_path(workspace.resolve(cwd))
    return resolve_against(default_working_directory, cwd)


def audit_fields(runtime: object) -> dict[str, Any]:
    """The audit event fields a runtime contributes to its operations' events.

    ``runtime`` (the runtime's ``name``), ``conversation_id`` (of its workspace, if any) and,
    when its class has a ``sandbox_id`` attribute, a ``sandbox_source`` that reads it when the
    event ends.
    """
    workspace = getattr(runtime, "workspace", None)
    fields: dict[str, Any] = {
        "runtime": str(getattr(runtime, "name", "runtime")),
        "conversation_id": getattr(workspace, "conversation_id", None),
    }
    if hasattr(type(runtime), "sandbox_id") or "sandbox_id" in getattr(runtime, "__dict__", {}):

        def sandbox() -> str | None:
            value = getattr(runtime, "sandbox_id", None)
            return value if isinstance(value, str) else None

        fields["sandbox_source"] = sandbox
    return fields


def merge_environment(
    base: Mapping[str, str],
    skill_layers: Iterable[Mapping[str, str]],
    request: Mapping[str, str],
) -> dict[str, str]:
    """Environment precedence, lowest first: base, prepared skills in order, the request."""
    merged = dict(base)
    for layer in skill_layers:
        merged.update(layer)
    merged.update(request)
    return merged


class RuntimeState:
    """The state both base runtimes keep and read the same way: workspace, closed flag, base
    environment and the environment layers of prepared skills (a mixin; the base classes set
    the attributes)."""

    _workspace: ConversationWorkspace | None
    _closed: bool
    _lock: AbstractContextManager[Any]
    _base_environment: dict[str, str]
    _skill_environment: dict[str, dict[str, str]]

    def _runtime_name(self) -> str:
        return str(getattr(self, "name", "runtime"))

    @property
    def workspace(self) -> ConversationWorkspace | None:
        """The conversation workspace, when the runtime has one."""
        return self._workspace

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def _ensure_open(self) -> None:
        if self._closed:
            raise closed_error(self._runtime_name())

    _audit_cache: dict[str, Any] | None = None

    def _audit_fields(self) -> dict[str, Any]:
        """The fields this runtime contributes to audit events (:func:`audit_fields`), built
        once: the name and the workspace never change and the sandbox id is read when each
        event ends. Callers unpack the dict and must not change it."""
        fields = self._audit_cache
        if fields is None:
            fields = self._audit_cache = audit_fields(self)
        return fields

    def effective_environment(self, request_environment: Mapping[str, str]) -> dict[str, str]:
        """The environment overlay of a command: base < prepared skill configs < request."""
        with self._lock:
            layers = list(self._skill_environment.values())
        return merge_environment(self._base_environment, layers, request_environment)


@dataclass(frozen=True)
class ScannedSkill:
    """A skill's source directory, the files the upload policy admits, and their digest."""

    source: Path
    files: list[SkillFile]
    digest: str


def scan_skill(skill: Skill, policy: UploadPolicy) -> ScannedSkill:
    """Walk ``skill.base_path`` under ``policy`` and digest it; unreadable sources fail prepare."""
    source = Path(skill.base_path)
    try:
        files = list(iter_skill_files(source, policy))
        digest = skill_digest(files)
    except OSError as exc:
        raise SkillPrepareError(
            f"Cannot read skill '{skill.name}' at {source}: {exc.strerror or exc}",
            skill_name=skill.name,
        ) from exc
    return ScannedSkill(source, files, digest)


def prepare_key(skill: Skill, digest: str, config: SkillRuntimeConfig) -> PrepareKey:
    """The key under which a runtime caches (and single-flights) one preparation."""
    return (skill.name, digest, config.model_dump_json())


# ------------------------------------------------------------------ preparation steps


@dataclass(frozen=True)
class CheckReady:
    """Ask whether a complete prepared copy already exists at ``target`` (answer: ``bool``)."""

    target: str


@dataclass(frozen=True)
class PlaceFiles:
    """Copy or upload ``files`` of ``skill`` into ``target``."""

    skill: Skill
    files: list[SkillFile]
    target: str


@dataclass(frozen=True)
class Bootstrap:
    """Run ``config``'s bootstrap commands for the prepared ``skill``."""

    skill: Skill
    config: SkillRuntimeConfig


@dataclass(frozen=True)
class MarkReady:
    """Record that the copy at ``target`` is complete and bootstrapped; ``digest`` is the
    :func:`~skillruntime.core.skills.files.prepared_copy_digest` that names it (content and
    bootstrap commands)."""

    target: str
    digest: str


PreparationStep = CheckReady | PlaceFiles | Bootstrap | MarkReady


def preparation_plan(
    skill: Skill, config: SkillRuntimeConfig, scanned: ScannedSkill, skills_root: str | None
) -> Generator[PreparationStep, Any, Skill]:
    """The steps of preparing one skill; returns the prepared skill.

    ``config`` is the resolved config (:meth:`SkillPreparationRequest.config_for
    <skillruntime.core.models.SkillPreparationRequest.config_for>`): its ``bootstrap`` lists
    every command to run. With no ``skills_root`` the skill is used in place (only
    bootstrapped). Otherwise it goes to ``<skills_root>/<safe-name>-<digest12>``, the digest
    being :func:`~skillruntime.core.skills.files.prepared_copy_digest` of the content and those
    commands, so a copy marked ready is one bootstrapped with exactly them; it is reused, else
    the copy is placed, bootstrapped and only then marked ready. The driver sends ``bool`` for
    :class:`CheckReady` and ``None`` for the others.
    """
    if skills_root is None:
        prepared = skill.with_base_path(str(scanned.source.resolve()))
        yield Bootstrap(prepared, config)
        return prepared
    digest = prepared_copy_digest(scanned.digest, [step.command for step in config.bootstrap])
    target = posixpath.join(skills_root, prepared_directory_name(skill.name, digest))
    prepared = skill.with_base_path(target)
    if not (yield CheckReady(target)):
        yield PlaceFiles(skill, scanned.files, target)
        yield Bootstrap(prepared, config)
        yield MarkReady(target, digest)
    return prepared


# -------------------------------------------------------------------------- failures


def place_failure(skill: Skill, runtime_name: str, exc: Exception) -> Exception:
    """What a failed copy raises: prepare and closed errors as they are, others wrapped."""
    if isinstance(exc, SkillPrepareError | RuntimeClosedError):
        return exc
    return SkillPrepareError(
        f"Copying skill '{skill.name}' into the {runtime_name} runtime failed: {exc}",
        skill_name=skill.name,
    )


def bootstrap_transport_failure(skill: Skill, runtime_name: str, exc: Exception) -> Exception:
    """What a bootstrap command that could not run raises (other errors pass unchanged)."""
    if isinstance(exc, SkillPrepareError | RuntimeClosedError) or not isinstance(
        exc, SkillRuntimeError
    ):
        return exc
    return SkillPrepareError(
        f"Bootstrap of skill '{skill.name}' could not run in the {runtime_name} runtime: {exc}",
        skill_name=skill.name,
    )


def bootstrap_requests(
    skill: Skill, config: SkillRuntimeConfig
) -> Iterator[tuple[int, BootstrapCommand, SkillExecutionRequest]]:
    """The bootstrap commands of ``config`` as requests run in the prepared skill root."""
    for index, step in enumerate(config.bootstrap, start=1):
        yield (
            index,
            step,
            SkillExecutionRequest(
                command=step.command,
                working_directory=skill.base_path,
                timeout_seconds=step.timeout_seconds,
                environment=dict(config.environment),
            ),
        )


def bootstrap_failure(
    skill: Skill, index: int, step: BootstrapCommand, result: SkillExecutionResult
) -> SkillPrepareError | None:
    """``None`` for a successful bootstrap command, else the error carrying its output tail."""
    if result.ok:
        return None
    combined = (result.stdout + result.stderr)[-BOOTSTRAP_OUTPUT_TAIL:]
    what = (
        f"timed out after {step.timeout_seconds:g}s"
        if result.timed_out
        else f"failed with exit code {result.exit_code}"
    )
    return SkillPrepareError(
        f"Bootstrap command {index} of skill '{skill.name}' {what}; output tail:\n{combined}",
        skill_name=skill.name,
        exit_code=result.exit_code,
        output_tail=combined,
        timed_out=result.timed_out,
    )
