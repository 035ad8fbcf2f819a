"""Registers the ``aio`` runtime with skillruntime (entry point ``skillruntime.aio.plugin``)."""

from __future__ import annotations

from typing import Any

from skillruntime.core.plugins import RuntimeProvider, hookimpl
from skillruntime.core.runtime import SkillRuntime

from .options import AioRuntimeOptions

__all__ = ["create_aio_runtime", "skillruntime_runtimes"]


def create_aio_runtime(options: AioRuntimeOptions) -> SkillRuntime:
    """Factory of the ``aio`` provider: a runtime built from validated options."""
    from .runtime import AioSandboxSkillRuntime

    return AioSandboxSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``aio`` runtime provider."""
    return [
        RuntimeProvider(
            name="aio",
            description="Runs skills in an existing AIO Sandbox service over its HTTP API.",
            options_model=AioRuntimeOptions,
            factory=create_aio_runtime,
            distribution="skillruntime-aio",
        )
    ]
