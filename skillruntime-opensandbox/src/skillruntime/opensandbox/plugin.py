"""Registers the ``opensandbox`` runtime (entry point ``skillruntime.opensandbox.plugin``)."""

from __future__ import annotations

from typing import Any

from skillruntime.core.async_runtime import AsyncSkillRuntime
from skillruntime.core.plugins import RuntimeProvider, hookimpl
from skillruntime.core.runtime import SkillRuntime

from .async_runtime import AsyncOpenSandboxSkillRuntime
from .options import OpenSandboxRuntimeOptions
from .runtime import OpenSandboxSkillRuntime

__all__ = [
    "create_async_opensandbox_runtime",
    "create_opensandbox_runtime",
    "skillruntime_runtimes",
]


def create_opensandbox_runtime(options: OpenSandboxRuntimeOptions) -> SkillRuntime:
    """Factory of the ``opensandbox`` provider: a runtime from validated options."""
    return OpenSandboxSkillRuntime(**options.runtime_arguments())


def create_async_opensandbox_runtime(options: OpenSandboxRuntimeOptions) -> AsyncSkillRuntime:
    """Async factory of the ``opensandbox`` provider: the native async runtime."""
    return AsyncOpenSandboxSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``opensandbox`` runtime provider."""
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
