"""Registers the ``opensandbox`` runtime (entry point ``skillruntime.opensandbox.plugin``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillruntime.core.plugins.registry import ConversationReaperProvider, RuntimeProvider, hookimpl

if TYPE_CHECKING:
    from skillruntime.core.plugins.listings import RuntimeListing
    from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
    from skillruntime.core.runtime.spi import SkillRuntime

    from .options import OpenSandboxRuntimeOptions

__all__ = [
    "create_async_opensandbox_runtime",
    "create_opensandbox_runtime",
    "skillruntime_conversation_reapers",
    "skillruntime_runtime_listings",
    "skillruntime_runtimes",
]


def create_opensandbox_runtime(options: OpenSandboxRuntimeOptions) -> SkillRuntime:
    """Factory of the ``opensandbox`` provider: a runtime from validated options.

    The runtime (and the OpenSandbox SDK) is imported here, not when the plugin loads.
    """
    from .runtime import OpenSandboxSkillRuntime

    return OpenSandboxSkillRuntime(**options.runtime_arguments())


def create_async_opensandbox_runtime(options: OpenSandboxRuntimeOptions) -> AsyncSkillRuntime:
    """Async factory of the ``opensandbox`` provider: the native async runtime.

    Like the sync factory, it imports the runtime (and the SDK) only when called.
    """
    from .async_runtime import AsyncOpenSandboxSkillRuntime

    return AsyncOpenSandboxSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtime_listings() -> list[RuntimeListing]:
    """The ``opensandbox`` runtime as ``skillruntime runtimes`` lists it (no options model)."""
    from .listing import OPENSANDBOX_LISTING

    return [OPENSANDBOX_LISTING]


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``opensandbox`` runtime provider (imports its options model)."""
    from .options import OpenSandboxRuntimeOptions

    return [
        RuntimeProvider(
            name="opensandbox",
            description="Runs skills in an OpenSandbox sandbox, one per conversation.",
            options_model=OpenSandboxRuntimeOptions,
            factory=create_opensandbox_runtime,
            async_factory=create_async_opensandbox_runtime,
            distribution="skillruntime-opensandbox",
        )
    ]


def _reaper() -> object:
    from .sweeping import reaper_from_environment

    return reaper_from_environment()


@hookimpl
def skillruntime_conversation_reapers() -> list[ConversationReaperProvider]:
    """Sweeps kill idle conversations' sandboxes and find orphans (server from the environment)."""
    return [
        ConversationReaperProvider(
            runtime="opensandbox",
            description="kills the sandbox of an idle conversation; lists orphan sandboxes",
            factory=_reaper,
            distribution="skillruntime-opensandbox",
        )
    ]
