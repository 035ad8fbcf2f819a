"""``SkillTools``: the model-facing tool set over one runtime."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ..conversations.leases import ConversationLeaseError
from ..files.publishing import FilePublisher
from ..models import SkillRuntimeConfig
from ..runtime.closing import Closeable
from ..runtime.spi import SkillRuntime
from .activator import SkillActivator, skill_tool
from .arguments import SkillArguments
from .base import ArgumentsError, SkillTool, parse_arguments
from .batch import CallInput, run_batch
from .context import ToolContext
from .publish import publish_file_tool
from .resources import ResourceKind
from .runtime_tools import runtime_tools
from .skill import (
    DEFAULT_DESCRIPTION_TEMPLATE,
    DEFAULT_LISTING_BUDGET,
    SkillSource,
)
from .tool_sets import (
    SkillInput,
    ToolSetView,
)
from .turn import SkillTurn
from .views import ToolCall, ToolResult, UsageRecord, error_code

__all__ = ["SkillInput", "SkillTools"]

logger = logging.getLogger(__name__)


def _skill_argument(arguments: Mapping[str, Any] | str | None) -> str:
    try:
        return str(parse_arguments(SkillArguments, arguments).command).strip()
    except ArgumentsError:
        return ""


class SkillTools(ToolSetView[SkillTool], Closeable):
    """Framework-neutral skill tools sharing one runtime.

    ``skills`` are :class:`Skill` objects (see ``skillruntime.core.skills.load_skill`` and
    ``discover_skills``, which also selects skills by name), :class:`SkillSource` objects, or host
    directories. ``configs`` maps skill names to their :class:`SkillRuntimeConfig`. A skill's
    declared bootstrap commands (``metadata.skillruntime.bootstrap``) run when the ``skill`` tool
    prepares it, with or without a config; a config adds environment and commands run after
    them, or replaces them with ``declared_bootstrap=False`` (see
    :func:`~skillruntime.core.skills.resolve_skill_config`). With a ``publisher`` the
    ``publish_file`` tool is added (9 tools instead of 8).

    Construction validates names and configs and parses every loaded skill's policy, but prepares
    nothing and makes no runtime call. The runtime is not owned: closing it is the caller's job.

    After a skill is activated, :attr:`tools` lists only the tools every active skill allows
    (``always_allowed`` names — by default just ``skill`` — always stay), and a call to another
    tool is refused with an ``Error:`` result.

    The ``skill`` tool lists every configured skill within ``listing_budget`` characters (see
    :func:`~skillruntime.core.tools.skill.skills_xml`; ``None`` for no budget).

    ``exclusive=True`` runs each tool call inside ``runtime.exclusive_session()``: the whole
    call holds the conversation's lease (the runtime must be built with ``exclusive=True``). A
    lease that cannot be taken in time or is lost during the call makes the call return an
    ``Error:`` result naming the lease; the next call takes the lease afresh.
    """

    def __init__(
        self,
        runtime: SkillRuntime,
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
            "SkillTools",
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
        self._base_activator = SkillActivator(runtime, self._sources, self._configs)
        self._turn: SkillTurn | None = None
        self._turn_lock = threading.Lock()
        context = ToolContext(runtime)
        guard = self._guard
        built = [
            skill_tool(lambda: self._activator, description),
            *runtime_tools(context, guard),
        ]
        if publisher is not None:
            built.append(publish_file_tool(context, publisher, guard))
        self._tools = {tool.name: tool for tool in built}

    # ------------------------------------------------------------------ turns

    @property
    def _activator(self) -> SkillActivator:
        """The open turn's activator, else the tool set's own."""
        turn = self._turn
        return turn.activator if turn is not None else self._base_activator

    def _activations(self) -> SkillActivator:
        return self._activator

    @property
    def current_turn(self) -> SkillTurn | None:
        """The open turn, if any."""
        return self._turn

    def turn(
        self,
        turn_id: str | None = None,
        *,
        resource_inputs: Mapping[str, Mapping[str, ResourceKind]] | None = None,
        turn_copies: bool | None = None,
    ) -> SkillTurn:
        """Open the :class:`~skillruntime.core.tools.turn.SkillTurn` of one user message; close
        it in ``finally`` (or use it as a context manager).

        While it is open, :attr:`tools`, :meth:`dispatch` and :meth:`dispatch_batch` act in it:
        skills activated before the turn do not count, and those activated in it are gone once
        it closes. One turn at a time: opening a second raises ``RuntimeError``.
        ``turn_copies``: which skills run from a per-turn copy deleted at close (``None``: the
        remote ones; ``True``: all; ``False``: none).
        """
        with self._turn_lock:
            if self._turn is not None:
                raise RuntimeError(f"turn {self._turn.id} is still open; close it first")
            activator = SkillActivator(self.runtime, self._sources, self._configs)
            self._turn = SkillTurn(
                self,
                activator,
                turn_id=turn_id,
                resource_inputs=resource_inputs,
                turn_copies=turn_copies,
            )
            return self._turn

    def subagent_tools(self, remote_sources: Iterable[SkillSource] = ()) -> SkillTools:
        """A tool set for a subagent (``docs/agent-turn.md``, "Subagents"): same runtime and
        publisher, the local skills of this set, and no remote ones unless the caller passes its
        own ``remote_sources`` (new source objects, e.g. from ``viking_skill_sources``, so no
        lease is shared). Nothing is inherited: no active skill, no open turn, no usage record;
        the subagent opens its own turns. A skill is remote when its location is a ``viking://``
        URI. Close the returned set when the subagent is done.
        """
        local = [
            source
            for source in self._sources.values()
            if not source.location.startswith("viking://")
        ]
        sources = [*local, *remote_sources]
        names = {source.name for source in sources}
        return SkillTools(
            self.runtime,
            sources,
            configs={name: config for name, config in self._configs.items() if name in names},
            publisher=self.publisher,
            description_template=self._listing[0],
            always_allowed=self._always_allowed,
            listing_budget=self._listing[1],
        )

    def end_turn(self, turn: SkillTurn) -> None:
        """Forget ``turn`` as the open turn (called by the turn's ``close()``; a turn that is
        not the open one changes nothing)."""
        with self._turn_lock:
            if self._turn is turn:
                self._turn = None

    def dispatch_batch(self, calls: Iterable[CallInput]) -> list[ToolResult]:
        """Run the calls of one model response under the same-batch rule (see
        :mod:`~skillruntime.core.tools.batch`): activations first; the other calls return
        ``SKILL_CONTEXT_UPDATED`` when a skill became active, ``SKILL_ACTIVATION_FAILED`` when an
        activation failed, and run otherwise. Results keep the call order.

        In an open turn this is :meth:`SkillTurn.dispatch_batch` (with resource resolution and
        usage records kept by the turn); without one, calls run as :meth:`dispatch` runs them.
        """
        turn = self._turn
        if turn is not None:
            return turn.dispatch_batch(calls)
        return run_batch(calls, self._plain_result, self._activator.active_names)

    async def adispatch_batch(self, calls: Iterable[CallInput]) -> list[ToolResult]:
        """:meth:`dispatch_batch` for asyncio code, run in a worker thread of the loop's
        default executor (a cancelled await does not stop the calls)."""
        batch = list(calls)
        return await asyncio.to_thread(self.dispatch_batch, batch)

    def _plain_result(self, call: ToolCall) -> ToolResult:
        content = self._dispatch(call.name, call.arguments)
        uris: tuple[str, ...] = ()
        if call.name == "skill" and not content.startswith("Error:"):
            source = self._sources.get(_skill_argument(call.arguments))
            uris = (source.location,) if source is not None else ()
        return ToolResult(
            call,
            content,
            UsageRecord(
                call_id=call.id,
                tool=call.name,
                status="error" if content.startswith("Error:") else "ok",
                code=error_code(content),
                skill_uris=uris,
            ),
        )

    # ------------------------------------------------------------------ calls

    def dispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run the tool call ``name(arguments)``; always returns a string, never raises."""
        return self._dispatch(name, arguments)

    async def adispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """:meth:`dispatch` for asyncio code, run in a worker thread of the loop's default
        executor. The lazy one-time preparation of a skill holds under concurrent calls from
        tasks and threads alike; a cancelled await does not stop the call."""
        return await asyncio.to_thread(self._dispatch, name, arguments)

    def _dispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return self._unknown_tool(name)
        if not self.exclusive:
            return tool.run(arguments)
        try:
            with self.runtime.exclusive_session():  # type: ignore[attr-defined]
                return tool.run(arguments)
        except ConversationLeaseError as error:
            return f"Error: {error}"

    def close(self) -> None:
        """Release what the skill sources hold (e.g. artifact leases); the runtime stays open.
        An open turn is closed first.

        Idempotent as far as the sources' own ``close`` is. Every closable source is closed even
        when one of them fails; the first failure is raised afterwards.
        """
        failure: BaseException | None = None
        turn = self._turn
        if turn is not None:
            try:
                turn.close()
            except Exception as exc:
                failure = exc
        self._close_sources(failure)
