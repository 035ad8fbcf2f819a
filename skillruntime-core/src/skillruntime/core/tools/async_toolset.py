"""``AsyncSkillTools``: the model-facing tool set over one :class:`AsyncSkillRuntime`.

The twin of :class:`~skillruntime.core.tools.toolset.SkillTools` for asyncio programs: the same
nine tools, names, descriptions, JSON Schemas, argument checks, ``allowed-tools`` policy, limits
and result texts, but every handler awaits the native async runtime, so a call holds no thread.
The seven runtime tools are one source for both faces
(:mod:`~skillruntime.core.tools.async_runtime_tools`, from which the sync
:mod:`~skillruntime.core.tools.runtime_tools` is generated). The ``skill`` tool prepares a skill
lazily on its first use, once even under concurrent activations (an :class:`asyncio.Lock` per
skill).

Two steps still run in a worker thread because their APIs are sync host code: loading a skill
source on its first activation (an artifact store may download it) and handing a file to a
:class:`~skillruntime.core.files.publishing.FilePublisher` (``publish_file``; the runtime file is
first spooled into a temporary file that stays in memory up to 4 MiB).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Collection, Iterable, Mapping
from typing import Any, BinaryIO, cast

from ..conversations.leases import ConversationLeaseError
from ..files.publishing import FilePublisher, safe_file_name
from ..models import SkillRuntimeConfig
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.closing import Closeable
from .arguments import PublishFileArguments
from .async_activator import AsyncSkillActivator, skill_tool
from .async_runtime_tools import runtime_tools
from .base import AsyncSkillTool, Guard
from .context import AsyncToolContext
from .publish import DESCRIPTION as PUBLISH_DESCRIPTION
from .publish import content_type_of, published_text
from .skill import (
    DEFAULT_DESCRIPTION_TEMPLATE,
    DEFAULT_LISTING_BUDGET,
)
from .tool_sets import (
    SkillInput,
    ToolSetView,
)

__all__ = ["AsyncSkillTool", "AsyncSkillTools"]

logger = logging.getLogger(__name__)

_SPOOL_BYTES = 4 * 1024 * 1024


def _publish_tool(
    context: AsyncToolContext, publisher: FilePublisher, guard: Guard
) -> AsyncSkillTool:
    name = context.name

    async def publish(arguments: PublishFileArguments) -> str:
        path = context.resolve(arguments.file_path)
        files = await context.file_system()
        info = await files.stat(path)
        if info is None:
            return f"Error: File does not exist in {name} runtime: {path}"
        if info.is_directory:
            return f"Error: Only regular files can be published: {path}"
        file_name = safe_file_name(arguments.file_name or path)
        content_type = content_type_of(file_name, arguments.content_type)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            size = 0
            chunks = files.read_stream(path)
            try:
                async for chunk in chunks:
                    spool.write(chunk)
                    size += len(chunk)
            finally:
                await chunks.aclose()
            spool.seek(0)
            published = await asyncio.to_thread(
                publisher.publish, file_name, cast(BinaryIO, spool), content_type=content_type
            )
            if spool.read(1):
                return (
                    f"Error: the file publisher returned before reading all of {path}; "
                    "the file was not delivered"
                )
        return published_text(published, file_name, content_type, size)

    return AsyncSkillTool(
        "publish_file",
        PUBLISH_DESCRIPTION,
        PublishFileArguments,
        publish,
        guard=guard,
        error_prefix=f"publishing the file from the {name} runtime failed",
    )


class AsyncSkillTools(ToolSetView[AsyncSkillTool], Closeable):
    """Framework-neutral skill tools sharing one async runtime (see the module docs).

    Arguments, validation and policy are those of
    :class:`~skillruntime.core.tools.toolset.SkillTools`; call tools with
    ``await tools.adispatch(name, arguments)`` or ``await tool.ainvoke(arguments)``. Construction
    prepares nothing and makes no runtime call; the runtime is not owned.

    ``exclusive=True`` runs each :meth:`adispatch` inside ``async with
    runtime.exclusive_session()``, as ``SkillTools(exclusive=True)`` does with ``dispatch``: the
    whole call holds the conversation's lease (the runtime must be built with
    ``exclusive=True``); a lease that cannot be taken in time or is lost during the call makes
    the call return an ``Error:`` result naming the lease, and the next call takes it afresh.
    """

    def __init__(
        self,
        runtime: AsyncSkillRuntime,
        skills: Iterable[SkillInput] = (),
        *,
        configs: Mapping[str, SkillRuntimeConfig] | None = None,
        publisher: FilePublisher | None = None,
        description_template: str = DEFAULT_DESCRIPTION_TEMPLATE,
        always_allowed: Collection[str] = ("skill",),
        listing_budget: int | None = DEFAULT_LISTING_BUDGET,
        exclusive: bool = False,
    ) -> None:
        description = self._configure(
            "AsyncSkillTools",
            runtime,
            skills,
            configs=configs,
            publisher=publisher,
            description_template=description_template,
            always_allowed=always_allowed,
            listing_budget=listing_budget,
            exclusive=exclusive,
        )
        self.runtime = runtime
        self._activator = AsyncSkillActivator(runtime, self._sources, self._configs)
        context = AsyncToolContext(runtime)
        built = [
            skill_tool(self._activator, description),
            *runtime_tools(context, self._guard),
        ]
        if publisher is not None:
            built.append(_publish_tool(context, publisher, self._guard))
        self._tools = {tool.name: tool for tool in built}

    def _activations(self) -> AsyncSkillActivator:
        return self._activator

    async def adispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run the tool call ``name(arguments)`` on the event loop; always a string."""
        tool = self._tools.get(name)
        if tool is None:
            return self._unknown_tool(name)
        if not self.exclusive:
            return await tool.ainvoke(arguments)
        try:
            async with self.runtime.exclusive_session():  # type: ignore[attr-defined]
                return await tool.ainvoke(arguments)
        except ConversationLeaseError as error:
            return f"Error: {error}"

    def close(self) -> None:
        """Release what the skill sources hold; the runtime stays open (first failure raised
        after every source was closed)."""
        self._close_sources()
