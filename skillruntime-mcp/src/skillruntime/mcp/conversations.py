"""A served conversation: one async runtime and the async skill tools over it.

:class:`ServeConfig` says what every conversation is built from (the runtime name and options,
the configured skills, the optional publishing directory); :meth:`ServedConversation.open`
builds one for a conversation id with
:func:`~skillruntime.core.plugins.registry.create_async_runtime` (the backend's native async
runtime, or its sync runtime behind the thread bridge) and
:class:`~skillruntime.core.tools.AsyncSkillTools`, so tool calls are awaited on the server's
event loop. Building happens in a worker thread and contacts nothing before the first tool call
for runtimes that connect lazily.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillruntime.core.files.publishing import FilePublisher, LocalDirectoryPublisher
from skillruntime.core.models import Skill, SkillRuntimeConfig
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.tools import AsyncSkillTools

__all__ = ["ServeConfig", "ServedConversation", "generated_conversation_id"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    """What the server builds each conversation from.

    ``runtime_options`` are keyword options of
    :func:`~skillruntime.core.plugins.registry.create_runtime`; the conversation id is added as the
    ``conversation_id`` option. ``skills`` are host skills (their ``base_path`` is a host
    directory holding ``SKILL.md``); ``configs`` maps skill names to their runtime config
    (environment, bootstrap commands added to the ones a skill declares, which run when the
    skill is prepared whether or not it has a config). With ``publish_directory`` the
    ``publish_file`` tool is served: files are copied to
    ``<publish_directory>/<random token>/<name>`` and the URL returned is
    ``<publish_base_url>/<token>/<name>`` (a ``file://`` URL without a base URL).
    """

    runtime_name: str
    runtime_options: Mapping[str, Any] = field(default_factory=dict)
    skills: tuple[Skill, ...] = ()
    configs: Mapping[str, SkillRuntimeConfig] = field(default_factory=dict)
    publish_directory: Path | None = None
    publish_base_url: str | None = None

    def publisher(self) -> FilePublisher | None:
        """The publisher of ``publish_file``, or ``None`` when publishing is not configured."""
        if self.publish_directory is None:
            return None
        return LocalDirectoryPublisher(self.publish_directory, self.publish_base_url)

    def skill(self, name: str) -> Skill | None:
        """The configured host skill called ``name``, or ``None``."""
        return next((skill for skill in self.skills if skill.name == name), None)


def generated_conversation_id() -> str:
    """A fresh conversation id (``mcp-<12 hex digits>``) for a client that names none."""
    return f"mcp-{uuid.uuid4().hex[:12]}"


class ServedConversation:
    """One async runtime and the :class:`AsyncSkillTools` over it, owned by the server.

    :meth:`aclose` closes both: the runtime's own ``close`` decides what is released (a
    sandbox without a conversation is destroyed, a conversation's sandbox is kept). A
    conversation opened with ``discard_on_close`` (the server generated its id, so no client
    can resume it) is discarded instead: its sandbox destroyed, or its workspace emptied and
    (on this host) removed, so that generated conversations do not pile up.
    """

    def __init__(
        self,
        conversation_id: str | None,
        runtime: AsyncSkillRuntime,
        tools: AsyncSkillTools,
        *,
        discard_on_close: bool = False,
    ) -> None:
        self.conversation_id = conversation_id
        self.runtime = runtime
        self.tools = tools
        self.discard_on_close = discard_on_close
        self._closed = False

    @classmethod
    async def open(
        cls, config: ServeConfig, conversation_id: str | None, *, discard_on_close: bool = False
    ) -> ServedConversation:
        """Build the runtime and the tools of ``conversation_id`` (``None``: no conversation);
        ``discard_on_close``: see the class docs."""
        options = dict(config.runtime_options)
        if conversation_id is not None:
            options["conversation_id"] = conversation_id
        runtime = await asyncio.to_thread(create_async_runtime, config.runtime_name, **options)
        try:
            tools = AsyncSkillTools(
                runtime, config.skills, configs=config.configs, publisher=config.publisher()
            )
        except BaseException:
            await runtime.close()
            raise
        logger.info(
            "serving conversation %s on the %s runtime", conversation_id or "(none)", runtime.name
        )
        return cls(conversation_id, runtime, tools, discard_on_close=discard_on_close)

    @property
    def workspace(self) -> ConversationWorkspace | None:
        """The runtime's conversation workspace, when it has one."""
        workspace = getattr(self.runtime, "workspace", None)
        return workspace if isinstance(workspace, ConversationWorkspace) else None

    def visible_tools(self) -> list[str]:
        """Names of the tools the active skills allow now."""
        return [tool.name for tool in self.tools.tools]

    async def aclose(self) -> None:
        """Close the tools' sources and the runtime, discarding the conversation first when
        asked to (idempotent; a failure to discard is logged, the runtime is still closed)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.discard_on_close:
                await self._discard()
            await asyncio.to_thread(self.tools.close)
        finally:
            await self.runtime.close()
        if self.discard_on_close:
            self._remove_local_workspace()
        logger.info("closed conversation %s", self.conversation_id or "(none)")

    async def _discard(self) -> None:
        try:
            destroy = getattr(self.runtime, "destroy_conversation_sandbox", None)
            if destroy is not None:
                await destroy()
                return
            workspace = self.workspace
            if workspace is None:
                return
            files = await self.runtime.get_file_system()
            if not await files.exists(workspace.directory):
                return
            while entries := await files.list_directory(workspace.directory):
                for entry in entries:
                    await files.delete(entry.path)
        except Exception as exc:
            logger.warning(
                "discarding conversation %s failed: %s", self.conversation_id or "(none)", exc
            )

    def _remove_local_workspace(self) -> None:
        """Remove the (now empty) workspace directory when it is on this host."""
        workspace = self.workspace
        if workspace is None or self.runtime.name != "local":
            return
        with contextlib.suppress(OSError):
            os.rmdir(workspace.directory)
