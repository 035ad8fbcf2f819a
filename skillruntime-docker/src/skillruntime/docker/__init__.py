"""Docker runtime: skills in a Docker container per conversation, on the ``docker`` SDK.

Install ``skillruntime-docker`` and build it with
``create_runtime("docker", image=…, conversation_id=…)`` or directly as
:class:`DockerSkillRuntime`; from asyncio, :class:`AsyncDockerSkillRuntime`
(``create_async_runtime("docker", …)``). See ``docs/docker-runtime.md``.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .async_runtime import AsyncDockerSkillRuntime
    from .errors import ContainerReplacedError, DockerEngineError, DockerExecutionError
    from .options import DockerRuntimeOptions
    from .runtime import DockerSkillRuntime
    from .sweeping import DockerReaper

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "AsyncDockerSkillRuntime": ".async_runtime",
        "ContainerReplacedError": ".errors",
        "DockerEngineError": ".errors",
        "DockerExecutionError": ".errors",
        "DockerReaper": ".sweeping",
        "DockerRuntimeOptions": ".options",
        "DockerSkillRuntime": ".runtime",
    },
)

__all__ = [
    "AsyncDockerSkillRuntime",
    "ContainerReplacedError",
    "DockerEngineError",
    "DockerExecutionError",
    "DockerReaper",
    "DockerRuntimeOptions",
    "DockerSkillRuntime",
    "__version__",
]
