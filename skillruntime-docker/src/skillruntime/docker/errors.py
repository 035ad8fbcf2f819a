"""Errors of the Docker runtime.

Each is under the core hierarchy (:mod:`skillruntime.core.errors`)::

    SkillRuntimeError
    └── DockerEngineError
        └── CommandNotStartedError
    ExecutionTransportError
    └── DockerExecutionError
        └── ContainerReplacedError
"""

from __future__ import annotations

from skillruntime.core.errors import ExecutionTransportError, SkillRuntimeError

__all__ = [
    "CommandNotStartedError",
    "ContainerReplacedError",
    "DockerEngineError",
    "DockerExecutionError",
]


class DockerEngineError(SkillRuntimeError):
    """The Docker Engine refused a request or could not be reached; ``status_code`` is the
    engine's HTTP status when it answered."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class CommandNotStartedError(DockerEngineError):
    """The engine refused to create the command's exec: the command never ran."""


class DockerExecutionError(ExecutionTransportError):
    """A command could not be run in the container or its outcome could not be read."""


class ContainerReplacedError(DockerExecutionError):
    """The conversation's container vanished while the command ran; the command died with it and
    was not retried. ``container_id`` names the vanished container."""

    def __init__(self, message: str, *, container_id: str) -> None:
        super().__init__(message)
        self.container_id = container_id
