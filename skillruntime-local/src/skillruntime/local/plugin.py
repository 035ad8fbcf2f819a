"""Registers the ``local`` runtime with skillruntime (entry point ``skillruntime.local.plugin``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillruntime.core.plugins.registry import ConversationReaperProvider, RuntimeProvider, hookimpl

if TYPE_CHECKING:
    from skillruntime.core.plugins.listings import RuntimeListing
    from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
    from skillruntime.core.runtime.spi import SkillRuntime

    from .options import LocalRuntimeOptions
    from .reaper import LocalWorkspaceReaper

__all__ = [
    "create_async_local_runtime",
    "create_local_runtime",
    "skillruntime_conversation_reapers",
    "skillruntime_runtime_listings",
    "skillruntime_runtimes",
]


def create_local_runtime(options: LocalRuntimeOptions) -> SkillRuntime:
    """Factory of the ``local`` provider: a :class:`LocalSkillRuntime` from validated options."""
    from .runtime import LocalSkillRuntime

    return LocalSkillRuntime(**options.runtime_arguments())


def create_async_local_runtime(options: LocalRuntimeOptions) -> AsyncSkillRuntime:
    """Async factory of the ``local`` provider: an :class:`AsyncLocalSkillRuntime` from
    validated options (the conversation store and lease options included)."""
    from .async_runtime import AsyncLocalSkillRuntime

    return AsyncLocalSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtime_listings() -> list[RuntimeListing]:
    """The ``local`` runtime as ``skillruntime runtimes`` lists it, without its options model."""
    from .listing import LOCAL_LISTING

    return [LOCAL_LISTING]


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``local`` runtime provider (imports its options model)."""
    from .options import LocalRuntimeOptions

    return [
        RuntimeProvider(
            name="local",
            description="Runs skill commands on this host with bash (not a sandbox).",
            options_model=LocalRuntimeOptions,
            factory=create_local_runtime,
            distribution="skillruntime-local",
            async_factory=create_async_local_runtime,
        )
    ]


def _reaper() -> LocalWorkspaceReaper:
    from .reaper import LocalWorkspaceReaper

    return LocalWorkspaceReaper()


@hookimpl
def skillruntime_conversation_reapers() -> list[ConversationReaperProvider]:
    """Sweeps remove idle ``local`` conversation workspaces on this host."""
    return [
        ConversationReaperProvider(
            runtime="local",
            description="removes the workspace directory of an idle local conversation",
            factory=_reaper,
            distribution="skillruntime-local",
        )
    ]
