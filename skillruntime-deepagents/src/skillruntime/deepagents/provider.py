""":class:`SkillRuntimeSandboxProvider`: every installed skillruntime runtime as a sandbox
provider of the deepagents command line (Deep Agents Code).

The CLI discovers providers through the entry-point group ``deepagents_code.sandbox_providers``
and builds one with no arguments; this distribution registers it there as ``skillruntime``. The
CLI then calls ``get_or_create(sandbox_id=..., **params)`` with the ``params`` of its config
file: ``runtime`` names the skillruntime runtime (default ``local``) and every other key is an
option of that runtime (``create_runtime`` validates them; ``SKILLRUNTIME_<NAME>_<OPTION>``
variables fill the rest). The sandbox id *is* the conversation id, so a later
``get_or_create(sandbox_id=<same id>)`` — in another process or on another node, with a
conversation store where the runtime has one — finds the same workspace and sandbox.

No class of the CLI is imported: the provider follows its interface (``get_or_create``,
``delete`` and their async twins), so the CLI is not a dependency.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

from skillruntime.core.plugins import create_runtime
from skillruntime.core.runtime import SkillRuntime

from .backend import SkillRuntimeBackend

__all__ = ["DEFAULT_RUNTIME", "SkillRuntimeSandboxProvider"]

logger = logging.getLogger(__name__)

DEFAULT_RUNTIME = "local"
"""The runtime built when the CLI's params name none."""


class SkillRuntimeSandboxProvider:
    """Builds a :class:`SkillRuntimeBackend` per sandbox id (= conversation id) and releases it
    on ``delete``. Safe to call from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runtimes: dict[str, SkillRuntime] = {}

    def get_or_create(self, *, sandbox_id: str | None = None, **kwargs: Any) -> SkillRuntimeBackend:
        """The backend of conversation ``sandbox_id`` (a new random id when ``None``) on the
        runtime ``kwargs["runtime"]`` with the other ``kwargs`` as its options."""
        options = dict(kwargs)
        name = str(options.pop("runtime", DEFAULT_RUNTIME))
        conversation = sandbox_id or f"deepagents-{uuid.uuid4().hex[:16]}"
        with self._lock:
            runtime = self._runtimes.get(conversation)
            if runtime is None:
                runtime = create_runtime(name, conversation_id=conversation, **options)
                self._runtimes[conversation] = runtime
        logger.info("deepagents sandbox %s on the %s runtime", conversation, runtime.name)
        return SkillRuntimeBackend(runtime, sandbox_id=conversation)

    def delete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """End conversation ``sandbox_id``: its sandbox is destroyed where the runtime owns one per
        conversation (OpenSandbox), then the runtime is closed. Files of a local or AIO workspace
        stay (those runtimes never delete a workspace)."""
        with self._lock:
            runtime = self._runtimes.pop(sandbox_id, None)
        if runtime is None:
            options = dict(kwargs)
            name = str(options.pop("runtime", DEFAULT_RUNTIME))
            runtime = create_runtime(name, conversation_id=sandbox_id, **options)
        try:
            destroy = getattr(runtime, "destroy_conversation_sandbox", None)
            if callable(destroy):
                destroy()
        finally:
            runtime.close()

    async def aget_or_create(
        self, *, sandbox_id: str | None = None, **kwargs: Any
    ) -> SkillRuntimeBackend:
        """Async :meth:`get_or_create` (in a worker thread)."""
        return await asyncio.to_thread(self.get_or_create, sandbox_id=sandbox_id, **kwargs)

    async def adelete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """Async :meth:`delete` (in a worker thread)."""
        await asyncio.to_thread(self.delete, sandbox_id=sandbox_id, **kwargs)
