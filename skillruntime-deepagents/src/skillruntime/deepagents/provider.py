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

**The working directory the CLI announces.** The CLI tells the model "you are operating in a
remote Linux sandbox at ``<working_dir>``" with the ``working_dir`` of the provider's
``metadata``, read from a *new* provider instance after ``get_or_create`` (in the same process:
the CLI's server builds the sandbox, then the agent's prompt). Without metadata the CLI assumes
``/workspace``, where a skillruntime backend refuses every path (its workspace is
``<conversations root>/<conversation id>``). So :attr:`SkillRuntimeSandboxProvider.metadata`
announces the default working directory of the backend most recently made by any provider of this
process (and not yet deleted); before there is one it announces :data:`NO_SANDBOX_WORKING_DIR`
(the CLI reads metadata then only for its capability flags).

No class of the CLI is imported at module level: the provider follows its interface
(``get_or_create``, ``delete``, their async twins and ``metadata``), so the CLI is not a
dependency; ``metadata`` builds the CLI's ``SandboxProviderMetadata`` when the CLI is installed
and is ``None`` otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

from skillruntime.core.plugins.registry import create_runtime
from skillruntime.core.runtime.spi import SkillRuntime

from .backend import SkillRuntimeBackend

__all__ = [
    "DEFAULT_RUNTIME",
    "NO_SANDBOX_WORKING_DIR",
    "PROVIDER_NAME",
    "SkillRuntimeSandboxProvider",
]

logger = logging.getLogger(__name__)

DEFAULT_RUNTIME = "local"
"""The runtime built when the CLI's params name none."""

PROVIDER_NAME = "skillruntime"
"""The provider's name in the CLI's entry-point group (``--sandbox skillruntime``)."""

NO_SANDBOX_WORKING_DIR = "/"
"""The working directory announced while this process has no live backend."""

_live_lock = threading.Lock()
_live_working_dirs: dict[str, str] = {}
"""Conversation id → default working directory of each live backend of this process, oldest
first (every provider instance shares it: the CLI reads metadata from a new instance)."""


def _record_live(conversation: str, working_dir: str) -> None:
    with _live_lock:
        _live_working_dirs.pop(conversation, None)
        _live_working_dirs[conversation] = working_dir


def _forget_live(conversation: str) -> None:
    with _live_lock:
        _live_working_dirs.pop(conversation, None)


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
        _record_live(conversation, runtime.default_working_directory)
        logger.info("deepagents sandbox %s on the %s runtime", conversation, runtime.name)
        return SkillRuntimeBackend(runtime, sandbox_id=conversation)

    @property
    def working_dir(self) -> str:
        """The working directory to announce: the default working directory
        (``<conversations root>/<conversation id>``) of the backend most recently returned by
        :meth:`get_or_create` of any provider in this process and not deleted since, else
        :data:`NO_SANDBOX_WORKING_DIR`."""
        with _live_lock:
            return next(reversed(_live_working_dirs.values()), NO_SANDBOX_WORKING_DIR)

    @property
    def metadata(self) -> Any:
        """The CLI's ``SandboxProviderMetadata`` announcing :attr:`working_dir` (sandbox ids
        supported, snapshots not), or ``None`` when the CLI is not installed."""
        try:
            from deepagents_code.integrations.sandbox_provider import (  # type: ignore[import-not-found]
                SandboxProviderMetadata,
            )
        except ImportError:
            return None
        return SandboxProviderMetadata(
            name=PROVIDER_NAME,
            working_dir=self.working_dir,
            supports_sandbox_id=True,
            supports_snapshot_name=False,
        )

    def delete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """End conversation ``sandbox_id``: its sandbox is destroyed where the runtime owns one per
        conversation (OpenSandbox), then the runtime is closed. Files of a local or AIO workspace
        stay (those runtimes never delete a workspace)."""
        with self._lock:
            runtime = self._runtimes.pop(sandbox_id, None)
        _forget_live(sandbox_id)
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
