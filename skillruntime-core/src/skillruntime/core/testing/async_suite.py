""":class:`AsyncRuntimeConformance`: the kit's contracts against an async runtime.

One set of contract definitions, two drivers. The sync driver (:class:`RuntimeConformance`)
calls a runtime directly; the async driver builds the runtime with :meth:`make_async_runtime`
and hands every contract a :func:`~skillruntime.core.runtime.bridge.to_sync` view of it, so each
contract's calls are awaited on one event loop, concurrent threads becoming concurrent tasks.
The cancellation contracts are added on top, and the event-loop contracts
(:class:`~skillruntime.core.testing.loop_contracts.EventLoopContracts`), which drive the async
runtime itself from consecutive :func:`asyncio.run` calls: one runtime object must serve any
event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..runtime.async_spi import AsyncBaseSkillRuntime, AsyncSkillRuntime
from ..runtime.bridge import LoopThreadRuntime, ThreadedAsyncRuntime, to_sync
from ..runtime.spi import SkillRuntime
from .async_spy import install_async_backend_spy
from .cancellation_contracts import CancellationContracts
from .loop_contracts import EventLoopContracts
from .suite import RuntimeConformance

__all__ = ["AsyncRuntimeConformance"]


class AsyncRuntimeConformance(RuntimeConformance, CancellationContracts, EventLoopContracts):
    """Subclass it as ``Test<YourAsyncRuntime>`` and implement :meth:`make_async_runtime`.

    Capability flags and the other hooks are those of :class:`RuntimeConformance`.
    """

    def make_async_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        """Build a new async runtime object (same rules as ``make_runtime`` of the sync kit)."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_async_runtime()")

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        """The async driver: the runtime of :meth:`make_async_runtime` behind ``to_sync``."""
        return to_sync(
            self.make_async_runtime(
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
            )
        )

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        """Build a new async runtime without a conversation (same rules as
        ``make_runtime_without_conversation`` of the sync kit; used when ``conversation_mode`` is
        off)."""
        raise NotImplementedError(
            f"{type(self).__name__} sets conversation_mode = False and must implement "
            "make_async_runtime_without_conversation()"
        )

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        """The async driver: the runtime of :meth:`make_async_runtime_without_conversation`
        behind ``to_sync``."""
        return to_sync(
            self.make_async_runtime_without_conversation(
                working_directory=working_directory, base_environment=base_environment
            )
        )

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        """Spies on the hooks of the :class:`AsyncBaseSkillRuntime` behind the driver, or of the
        :class:`BaseSkillRuntime` behind a thread bridge (else ``None``)."""
        if not isinstance(runtime, LoopThreadRuntime):
            return None
        native = runtime.async_runtime
        if isinstance(native, AsyncBaseSkillRuntime):
            spy = install_async_backend_spy(native)
            return lambda: spy.count
        if isinstance(native, ThreadedAsyncRuntime):
            return super().backend_call_counter(native.sync_runtime)
        return None
