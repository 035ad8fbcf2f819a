"""A served conversation: one async runtime and the async skill tools over it.

:class:`ServeConfig` says what every conversation is built from (the runtime name and options,
the configured skills, the optional publishing directory); :meth:`ServedConversation.open`
builds one for a conversation id with
:func:`~skillruntime.core.plugins.create_async_runtime` (the backend's native async runtime, or
its sync runtime behind the thread bridge) and
:class:`~skillruntime.core.tools.AsyncSkillTools`, so tool calls are awaited on the server's
event loop. Building happens in a worker thread and contacts nothing before the first tool call
for runtimes that connect lazily.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillruntime.core.async_runtime import AsyncSkillRuntime
from skillruntime.core.models import Skill, SkillRuntimeConfig
from skillruntime.core.plugins import create_async_runtime
from skillruntime.core.publishing import FilePublisher, LocalDirectoryPublisher
from skillruntime.core.tools import AsyncSkillTools

__all__ = ["ServeConfig", "ServedConversation"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    """What the server builds each conversation from.

    ``runtime_options`` are keyword options of
    :func:`~skillruntime.core.plugins.create_runtime`; the conversation id is added as the
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


class ServedConversation:
    """One async runtime and the :class:`AsyncSkillTools` over it, owned by the server.

    :meth:`aclose` closes both: the runtime's own ``close`` decides what is released (a
    sandbox without a conversation is destroyed, a conversation's sandbox is kept).
    """

    def __init__(
        self, conversation_id: str | None, runtime: AsyncSkillRuntime, tools: AsyncSkillTools
    ) -> None:
        self.conversation_id = conversation_id
        self.runtime = runtime
        self.tools = tools
        self._closed = False

    @classmethod
    async def open(cls, config: ServeConfig, conversation_id: str | None) -> ServedConversation:
        """Build the runtime and the tools of ``conversation_id`` (``None``: no conversation)."""
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
        return cls(conversation_id, runtime, tools)

    def visible_tools(self) -> list[str]:
        """Names of the tools the active skills allow now."""
        return [tool.name for tool in self.tools.tools]

    async def aclose(self) -> None:
        """Close the tools' sources and the runtime (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.to_thread(self.tools.close)
        finally:
            await self.runtime.close()
        logger.info("closed conversation %s", self.conversation_id or "(none)")
