"""Registers the ``aio`` runtime with skillruntime (entry point ``skillruntime.aio.plugin``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillruntime.core.plugins.registry import RuntimeProvider, hookimpl

if TYPE_CHECKING:
    from skillruntime.core.plugins.listings import RuntimeListing
    from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
    from skillruntime.core.runtime.spi import SkillRuntime

    from .options import AioRuntimeOptions

__all__ = [
    "create_aio_runtime",
    "create_async_aio_runtime",
    "skillruntime_runtime_listings",
    "skillruntime_runtimes",
]


def create_aio_runtime(options: AioRuntimeOptions) -> SkillRuntime:
    """Factory of the ``aio`` provider: a runtime built from validated options."""
    from .runtime import AioSandboxSkillRuntime

    return AioSandboxSkillRuntime(**options.runtime_arguments())


def create_async_aio_runtime(options: AioRuntimeOptions) -> AsyncSkillRuntime:
    """Async factory of the ``aio`` provider: a native :class:`AsyncAioSkillRuntime`."""
    from .async_runtime import AsyncAioSkillRuntime

    return AsyncAioSkillRuntime(**options.runtime_arguments())


@hookimpl
def skillruntime_runtime_listings() -> list[RuntimeListing]:
    """The ``aio`` runtime as ``skillruntime runtimes`` lists it, without its options model."""
    from .listing import AIO_LISTING

    return [AIO_LISTING]


@hookimpl
def skillruntime_runtimes() -> list[RuntimeProvider[Any]]:
    """The ``aio`` runtime provider (imports its options model)."""
    from .options import AioRuntimeOptions

    return [
        RuntimeProvider(
            name="aio",
            description="Runs skills in an existing AIO Sandbox service over its HTTP API.",
            options_model=AioRuntimeOptions,
            factory=create_aio_runtime,
            distribution="skillruntime-aio",
            async_factory=create_async_aio_runtime,
        )
    ]
