"""The MCP server over served conversations: tools, ``skill://`` resources, change events.

:class:`SkillMcpServer` wraps a low-level :class:`mcp.server.lowlevel.Server`. Every request
is answered by the conversation that ``resolve`` returns for it (one conversation on stdio; one
per MCP session, or the one the client names, over streamable HTTP).

- ``tools/list`` gives the tools the active skills allow now, with their JSON Schemas and
  descriptions; ``tools/call`` awaits one through :meth:`AsyncSkillTools.adispatch` on the
  conversation's async runtime. A refused or
  failing call is a result with ``isError: true``, never a protocol error.
- When a call changes the visible tool set (a skill's ``allowed-tools``), the client is sent
  ``notifications/tools/list_changed``; when it prepares a skill, whose files then become
  resources, ``notifications/resources/list_changed``. On 2026-era connections (no
  ``initialize`` handshake) the same events go to the client's ``subscriptions/listen``
  streams.
- ``resources/list`` and ``resources/read`` serve :mod:`skillruntime.mcp.resources`.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from skillruntime.core.errors import SkillRuntimeError

from .conversations import ServeConfig, ServedConversation
from .resources import ResourceUriError, list_skill_resources, read_skill_resource

__all__ = ["ERROR_PREFIX", "RESOURCE_NOT_FOUND", "Resolver", "SkillMcpServer"]

logger = logging.getLogger(__name__)

Resolver = Callable[[ServerRequestContext[Any, Any]], Awaitable[ServedConversation]]
"""Finds (or opens) the conversation that answers a request."""

ERROR_PREFIX = "Error:"
"""Tool results that start with this are reported with ``isError: true``."""

RESOURCE_NOT_FOUND = -32002
"""JSON-RPC error code of ``resources/read`` for an unknown resource (MCP specification)."""

INSTRUCTIONS = (
    "Agent Skills served by skillruntime. Call the skill tool with a skill name to load its "
    "instructions; bash, read, write, edit, ls, glob and grep then run in the same runtime as the "
    "skill. Skill files are readable as skill://NAME/PATH resources."
)


def _version() -> str:
    try:
        return importlib.metadata.version("skillruntime-mcp")
    except importlib.metadata.PackageNotFoundError:
        return "0"


_NOTIFICATIONS = NotificationOptions(tools_changed=True, resources_changed=True)


class _Server(Server[Any]):
    """The SDK's low-level server announcing ``listChanged`` for tools and resources even when
    the initialization options are built without arguments (as the SDK's streamable HTTP
    session manager does)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or _NOTIFICATIONS, experimental_capabilities, extensions
        )


class SkillMcpServer:
    """The skill tools and resources of served conversations as one MCP server."""

    def __init__(self, config: ServeConfig, resolve: Resolver, *, name: str = "skillruntime"):
        self.config = config
        self._resolve = resolve
        self._bus = InMemorySubscriptionBus()
        self.server: Server[Any] = _Server(
            name,
            version=_version(),
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=ListenHandler(self._bus),
        )

    def initialization_options(self) -> InitializationOptions:
        """What the server announces at ``initialize``: tools and resources with ``listChanged``."""
        return self.server.create_initialization_options(_NOTIFICATIONS)

    # ------------------------------------------------------------------ tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        conversation = await self._resolve(ctx)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name, description=tool.description, input_schema=tool.parameters
                )
                for tool in conversation.tools.tools
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        conversation = await self._resolve(ctx)
        tools = conversation.tools
        visible = conversation.visible_tools()
        prepared = [name for name in tools.skill_names if tools.prepared_skill(name)]
        text = await tools.adispatch(params.name, params.arguments or {})
        is_error = text.startswith(ERROR_PREFIX)
        if is_error:
            logger.info("tool %s returned an error result", params.name)
        if conversation.visible_tools() != visible:
            await self._publish(ctx, ToolsListChanged())
        if [name for name in tools.skill_names if tools.prepared_skill(name)] != prepared:
            await self._publish(ctx, ResourcesListChanged())
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def _publish(self, ctx: ServerRequestContext[Any, Any], event: ServerEvent) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self._bus.publish(event)
        elif isinstance(event, ToolsListChanged):
            await ctx.session.send_tool_list_changed()
        else:
            await ctx.session.send_resource_list_changed()

    # -------------------------------------------------------------- resources

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        conversation = await self._resolve(ctx)
        resources = await list_skill_resources(self.config, conversation)
        return types.ListResourcesResult(resources=resources)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        conversation = await self._resolve(ctx)
        try:
            contents = await read_skill_resource(self.config, conversation, params.uri)
        except ResourceUriError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except (LookupError, SkillRuntimeError, OSError) as exc:
            raise MCPError(RESOURCE_NOT_FOUND, f"cannot read {params.uri}: {exc}") from None
        return types.ReadResourceResult(contents=[contents])
