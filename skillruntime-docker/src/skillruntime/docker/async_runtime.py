"""``AsyncDockerSkillRuntime``: the Docker runtime for asyncio, through the core's thread bridge.

The Engine API client is synchronous (``requests``); every call of the async runtime runs the
sync :class:`~skillruntime.docker.DockerSkillRuntime` in a worker thread of the bridge
(:class:`~skillruntime.core.runtime.bridge.ThreadedAsyncRuntime`). A command costs a few exec round
trips to the engine, far more than the thread hop (measured in ``docs/docker-runtime.md``).
Cancelling an ``execute`` kills the command's processes in the container: the bridge marks each
command's environment and, on cancellation, runs one more command that kills every process
carrying the mark, before ``CancelledError`` reaches the caller.
"""

from __future__ import annotations

from typing import Any

from skillruntime.core.runtime.bridge import DEFAULT_BRIDGE_WORKERS, ThreadedAsyncRuntime

from .runtime import DockerSkillRuntime

__all__ = ["AsyncDockerSkillRuntime"]


class AsyncDockerSkillRuntime(ThreadedAsyncRuntime):
    """The async face of :class:`DockerSkillRuntime`; takes the same keyword arguments (plus
    ``max_workers``, the bridge's thread count)."""

    def __init__(self, *, max_workers: int = DEFAULT_BRIDGE_WORKERS, **options: Any) -> None:
        super().__init__(DockerSkillRuntime(**options), max_workers=max_workers)

    @property
    def docker_runtime(self) -> DockerSkillRuntime:
        """The wrapped sync runtime."""
        runtime = self.sync_runtime
        assert isinstance(runtime, DockerSkillRuntime)
        return runtime
