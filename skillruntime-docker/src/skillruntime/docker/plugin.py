"""Registers the ``docker`` runtime (entry point ``skillruntime.docker.plugin``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillruntime.core.plugins.registry import ConversationReaperProvider, RuntimeProvider, hookimpl

if TYPE_CHECKING:
    from skillruntime.core.plugins.listings import RuntimeListing
    from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
    from skillruntime.core.runtime.spi import SkillRuntime

    from .options import DockerRuntimeOptions

__all__ = [
    "create_async_docker_runtime",
    "create_docker_runtime",
    "skillruntime_conversation_reapers",
    "skillruntime_runtime_listings",
    "skillruntime_runtimes",
]


def create_docker_runtime(options: DockerRuntimeOptions) -> SkillRuntime:
    """Factory of the ``docker`` provider: a runtime from validated options.

    The runtime (and the ``docker`` SDK) is imported here, not when the plugin loads.
    """
    from .runtime import DockerSkillRuntime

    return DockerSkillRuntime(**options.runtime_arguments())


def create_async_docker_runtime(options: DockerRuntimeOptions) -> AsyncSkillRuntime:
    """Async factory of the ``docker`` provider: the sync runtime through the core's thread
    bridge (:func:`skillruntime.core.runtime.bridge.to_async`), whose cancellation kills the
    command's processes in the container."""
    from .async_runtime import AsyncDockerSkillRuntime

    return AsyncDockerSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtime_listings() -> list[RuntimeListing]:
    """The ``docker`` runtime as ``skillruntime runtimes`` lists it (no options model)."""
    from .listing import DOCKER_LISTING

    return [DOCKER_LISTING]


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``docker`` runtime provider (imports its options model)."""
    from .options import DockerRuntimeOptions

    return [
        RuntimeProvider(
            name="docker",
            description="Runs skills in a Docker container, one per conversation.",
            options_model=DockerRuntimeOptions,
            factory=create_docker_runtime,
            async_factory=create_async_docker_runtime,
            distribution="skillruntime-docker",
        )
    ]


def _reaper() -> object:
    from .sweeping import reaper_from_environment

    return reaper_from_environment()


@hookimpl
def skillruntime_conversation_reapers() -> list[ConversationReaperProvider]:
    """Sweeps remove idle conversations' containers and volumes and find orphans (engine from
    the environment)."""
    return [
        ConversationReaperProvider(
            runtime="docker",
            description="removes the container and volume of an idle conversation; lists orphans",
            factory=_reaper,
            distribution="skillruntime-docker",
        )
    ]
