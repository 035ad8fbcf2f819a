"""``SkillTurn``: the skill context of one agent turn (one user message).

Open one per user message with :meth:`SkillTools.turn` and close it in ``finally`` (it is a
context manager)::

    with tools.turn() as turn:
        ...  # every model iteration and tool call of this message
        results = turn.dispatch_batch(response_calls)

A turn holds, for that turn only (docs/agent-turn.md): the active skills, the
intersection of their policies, the requirement checks, the activation locks, the usage records
of its calls and the resources of its active skills. Closing it drops all of that; the next turn
activates its skills again, so each source re-checks access and revision (an OpenViking source
takes a new lease — the store's host cache is reused when the revision is unchanged — because
:meth:`SkillTurn.close` calls each loaded source's ``end_turn()``). The runtime's prepared
copies are cached by content digest, so an unchanged skill is not copied again.

Inside a turn, tool calls go through resource resolution (:mod:`.resources`) once a skill is
active, and :meth:`SkillTurn.dispatch_batch` applies the same-batch rule (:mod:`.batch`). Every
call leaves a :class:`~.views.UsageRecord`; results carry model, persisted and log views
(:mod:`.views`). Structured log records (``extra={"skill_event": …}``) mark turn open/close,
activations, resource resolutions and refusals; they never carry a skill body or arguments'
secrets.

One turn at a time per :class:`SkillTools`: a subagent gets its own ``SkillTools`` (with remote
sources only if it is given them) and so its own turns — nothing is inherited from the parent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import posixpath
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..models import Skill
from ..runtime.closing import Closeable
from ..runtime.spi import SkillRuntime
from .activator import SkillActivator
from .arguments import SkillArguments
from .base import ArgumentsError, SkillTool, parse_arguments
from .batch import ACTIVATION_TOOL, CallInput, as_call, run_batch
from .copies import TurnCopies
from .policy import SkillPolicy, check_requirements, refusal_reason
from .remote import (
    SKILL_MATERIALIZATION_FAILED,
    SKILL_REVISION_CHANGED,
    RemoteFirstSource,
    format_text_read,
    materialization_error,
    revision_changed,
)
from .resources import (
    DEFAULT_RESOURCE_INPUTS,
    ActiveResources,
    ResourceError,
    ResourceKind,
    ResourceResolver,
    validate_resource_inputs,
)
from .skill import failure_code, failure_text
from .turn_record import (
    AsyncTurnSessionSink,
    SessionOutcome,
    TurnRecord,
    TurnSessionSink,
    TurnToolCall,
)
from .views import CallStatus, ToolCall, ToolResult, UsageRecord, error_code, redact_text

__all__ = [
    "MAX_LISTED_FILES",
    "SKILL_CAPABILITY_UNAVAILABLE",
    "SKILL_MATERIALIZATION_FAILED",
    "SKILL_TOOL_NOT_ALLOWED",
    "SkillTurn",
    "TurnClosedError",
    "TurnTools",
    "skill_event",
]

logger = logging.getLogger(__name__)

SKILL_TOOL_NOT_ALLOWED = "SKILL_TOOL_NOT_ALLOWED"
SKILL_CAPABILITY_UNAVAILABLE = "SKILL_CAPABILITY_UNAVAILABLE"
MAX_LISTED_FILES = 10_000
"""Files of one skill considered for resource resolution at most."""


class TurnClosedError(RuntimeError):
    """The turn was closed; open a new one for the next user message."""


def skill_event(event: str, turn_id: str, **fields: Any) -> None:
    """Log one structured skill event (``extra={"skill_event": event, "turn_id": …, …}``)."""
    extra = {"skill_event": event, "turn_id": turn_id}
    extra.update({f"skill_{key}": value for key, value in fields.items()})
    details = " ".join(f"{key}={value}" for key, value in sorted(fields.items()))
    logger.info("skill %s turn=%s %s", event, turn_id, details, extra=extra)


def _skill_files(base: str) -> frozenset[str]:
    root = Path(base)
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root, followlinks=False):
        subdirectories.sort()
        relative = Path(directory).relative_to(root).as_posix()
        for name in sorted(files):
            found.append(name if relative == "." else f"{relative}/{name}")
            if len(found) >= MAX_LISTED_FILES:
                logger.warning(
                    "skill at %s has over %d files; the rest are not resolved",
                    base,
                    MAX_LISTED_FILES,
                )
                return frozenset(found)
    return frozenset(found)


def _run_unguarded(tool: SkillTool, arguments: Mapping[str, Any]) -> str:
    """Run ``tool`` on arguments whose policy check already passed (before resolution)."""
    try:
        parsed = parse_arguments(tool.arguments_model, arguments)
    except ArgumentsError as exc:
        return f"Error: invalid arguments for tool '{tool.name}': {exc}"
    return tool.run_checked(parsed)


class TurnTools(Protocol):
    """What a turn uses of the tool set that opens it (:class:`~.toolset.SkillTools`): the
    runtime, its tools by name, the names every policy lets through, the dispatch of a call, and
    the notice that the turn has ended."""

    @property
    def runtime(self) -> SkillRuntime:
        """The runtime the tools run in."""
        ...

    @property
    def always_allowed(self) -> frozenset[str]:
        """Tool names every policy lets through."""
        ...

    def get(self, name: str) -> SkillTool | None:
        """The tool called ``name``, or ``None``."""
        ...

    def dispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run one tool call outside any turn; never raises."""
        ...

    def end_turn(self, turn: SkillTurn) -> None:
        """Forget ``turn`` as the open turn."""
        ...


class SkillTurn(Closeable):
    """One agent turn over a :class:`~.toolset.SkillTools` (see the module docstring).

    ``resource_inputs`` maps tool names to their local-file inputs (JSON Pointer → kind); it
    defaults to :data:`~.resources.DEFAULT_RESOURCE_INPUTS`; a malformed one raises
    :class:`ValueError` naming the entry (:func:`~.resources.validate_resource_inputs`).
    ``turn_copies`` chooses which skills run from a turn-level copy (:mod:`.copies`) deleted at
    close: ``None`` (default) the remote ones (a ``viking://`` location), ``True`` all, ``False``
    none. Thread-safe for concurrent calls within the turn.
    """

    def __init__(
        self,
        tools: TurnTools,
        activator: SkillActivator,
        *,
        turn_id: str | None = None,
        resource_inputs: Mapping[str, Mapping[str, ResourceKind]] | None = None,
        turn_copies: bool | None = None,
    ) -> None:
        self.id = turn_id or uuid.uuid4().hex
        self._turn_copies = turn_copies
        self._copies = TurnCopies(tools.runtime, self.id)
        self._tools = tools
        self._activator = activator
        self._inputs = validate_resource_inputs(
            DEFAULT_RESOURCE_INPUTS if resource_inputs is None else resource_inputs
        )
        self._lock = threading.Lock()
        self._usage: list[UsageRecord] = []
        self._calls: list[TurnToolCall] = []
        self._session_outcome: SessionOutcome | None = None
        self._files: dict[str, frozenset[str]] = {}
        self._pending: dict[str, tuple[RemoteFirstSource, Skill]] = {}
        self._pinned: dict[str, str | None] = {}  # remote skill -> signature read at activation
        self._materialize_lock = threading.Lock()
        self._requirements_met: set[str] = set()
        self._closed = False
        skill_event("turn_opened", self.id)

    # ----------------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._closed

    @property
    def activator(self) -> SkillActivator:
        """This turn's activator (its active skills and policies)."""
        return self._activator

    @property
    def active_skills(self) -> list[str]:
        """Names of the skills active in this turn, in activation order."""
        return self._activator.active_names()

    @property
    def usage(self) -> list[UsageRecord]:
        """The usage records of this turn's calls, in completion order."""
        with self._lock:
            return list(self._usage)

    def skill_uri(self, name: str) -> str | None:
        """Where skill ``name`` comes from (its listing location), or ``None``."""
        source = self._activator.source(name)
        return source.location if source is not None else None

    def _check_open(self) -> None:
        if self._closed:
            raise TurnClosedError(f"turn {self.id} is closed")

    # ----------------------------------------------------------------- calls

    def dispatch(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
    ) -> str:
        """Run one call in this turn; the model view of its result (never raises, except
        :class:`TurnClosedError` after :meth:`close`)."""
        return self.call(ToolCall(name, arguments, call_id)).content

    def call(self, call: CallInput) -> ToolResult:
        """Run one call in this turn and return its :class:`~.views.ToolResult`.

        Never raises, except :class:`TurnClosedError` after :meth:`close`: an input that is not a
        call, and any failure of the call, is an ``Error:`` result (recorded in :attr:`usage`).
        """
        self._check_open()
        try:
            parsed = as_call(call)
        except (TypeError, ValueError) as exc:
            result = self._result(ToolCall(""), f"Error: invalid tool call: {exc}")
        else:
            result = self._run_safely(parsed)
        record = self._session_call(result)
        with self._lock:
            self._usage.append(result.usage)
            self._calls.append(record)
        return result

    def dispatch_batch(self, calls: Iterable[CallInput]) -> list[ToolResult]:
        """Run the calls of one model response under the same-batch rule (:mod:`.batch`);
        results in call order, each also recorded in :attr:`usage`."""
        self._check_open()
        results = run_batch(calls, self._run_safely, self._activator.active_names)
        records = [self._session_call(result) for result in results]
        with self._lock:
            self._usage.extend(result.usage for result in results)
            self._calls.extend(records)
        for result in results:
            if result.usage.status == "blocked":
                skill_event("call_blocked", self.id, tool=result.call.name, code=result.code)
        return results

    async def adispatch_batch(self, calls: Iterable[CallInput]) -> list[ToolResult]:
        """:meth:`dispatch_batch` for asyncio code, run in a worker thread of the loop's
        default executor (a cancelled await does not stop the calls)."""
        batch = list(calls)
        return await asyncio.to_thread(self.dispatch_batch, batch)

    def _result(
        self,
        call: ToolCall,
        content: str,
        *,
        skill_uris: Iterable[str] = (),
        resolved: Mapping[str, Any] | None = None,
        cause: str | None = None,
    ) -> ToolResult:
        status: CallStatus = "error" if content.startswith("Error:") else "ok"
        return ToolResult(
            call,
            content,
            UsageRecord(
                call_id=call.id,
                tool=call.name,
                status=status,
                code=error_code(content),
                skill_uris=tuple(skill_uris),
                resolved_args=resolved,
                cause=cause,
            ),
        )

    def _run_safely(self, call: ToolCall) -> ToolResult:
        """:meth:`_run`, with any exception turned into an ``Error:`` result (fail closed: the
        tool did not run, or its outcome is unknown)."""
        try:
            return self._run(call)
        except Exception as exc:
            logger.warning(
                "tool call %r failed in turn %s: %s", call.name, self.id, type(exc).__name__
            )
            return self._result(
                call, f"Error: the call of tool '{call.name}' failed: {type(exc).__name__}: {exc}"
            )

    def _run(self, call: ToolCall) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return self._result(call, self._tools.dispatch(call.name, call.arguments))
        if call.name == ACTIVATION_TOOL:
            return self._activate(call)
        try:
            parsed = parse_arguments(tool.arguments_model, call.arguments)
        except ArgumentsError as exc:
            return self._result(call, f"Error: invalid arguments for tool '{call.name}': {exc}")
        arguments = parsed.model_dump()
        policies = self._activator.active_policies()
        refusal = refusal_reason(call.name, arguments, policies, self._tools.always_allowed)
        if refusal is not None:
            skill_event("call_refused", self.id, tool=call.name, code=SKILL_TOOL_NOT_ALLOWED)
            return self._result(call, f"Error: {SKILL_TOOL_NOT_ALLOWED}: {refusal}")
        referenced: list[str] = []
        if call.name == "read":
            served = self._remote_read(call, arguments)
            if served is not None:
                return served
        unmet = self._pending_requirements()
        if unmet is not None:
            return self._result(call, unmet, resolved=arguments)
        if self._activator.active_names():
            try:
                arguments, referenced = self._resolve(call.name, arguments)
            except ResourceError as exc:
                skill_event("resource_refused", self.id, tool=call.name, code=exc.code)
                return self._result(call, f"Error: {exc}", resolved=arguments, cause=exc.cause)
            if referenced:
                skill_event("resource_resolved", self.id, tool=call.name, skill_uris=referenced)
        content = _run_unguarded(tool, arguments)
        return self._result(call, content, skill_uris=referenced, resolved=arguments)

    def _activate(self, call: ToolCall) -> ToolResult:
        try:
            name = parse_arguments(SkillArguments, call.arguments).command.strip()
        except ArgumentsError as exc:
            return self._result(call, f"Error: invalid arguments for tool 'skill': {exc}")
        uri = self.skill_uri(name)
        source = self._activator.source(name)
        if (
            isinstance(source, RemoteFirstSource) and name not in self._activator.active_names()
        ) or name in self._pending:
            return self._activate_remote_first(call, name, uri)
        content = self._activator.activate(name)
        if content.startswith("Error:"):
            skill_event("activation_failed", self.id, skill=name)
            return self._result(call, content, resolved={"command": name})
        if uri is not None and self._uses_copy(uri):
            prepared = self._activator.prepared(name)
            assert prepared is not None
            try:
                copy = self._copy(name, uri)
            except Exception as exc:
                self._activator.deactivate(name)
                logger.warning("the turn copy of skill %s failed: %s", name, exc)
                return self._result(call, f"Error: {exc}", resolved={"command": name})
            content = content.replace(
                f"Base directory for this skill: {prepared.base_path}\n",
                f"Base directory for this skill: {copy}\n",
                1,
            )
        skill_event("activated", self.id, skill=name, skill_uri=uri)
        return self._result(
            call, content, skill_uris=[uri] if uri else [], resolved={"command": name}
        )

    def _copy(self, name: str, uri: str) -> str:
        prepared = self._activator.prepared(name)
        assert prepared is not None
        copy = self._copies.copy(uri, name, prepared.base_path)
        skill_event("turn_copy", self.id, skill=name, skill_uri=uri)
        return copy

    def _activate_remote_first(self, call: ToolCall, name: str, uri: str | None) -> ToolResult:
        pending = self._pending.get(name)
        if pending is not None:
            skill = pending[1]
        else:
            source = self._activator.source(name)
            assert isinstance(source, RemoteFirstSource)
            try:
                skill = source.load_instructions()
                if skill.name != name:
                    raise ValueError(f"the source loaded a skill named '{skill.name}'")
                policy = SkillPolicy.from_skill(skill)
            except Exception as exc:
                logger.warning("loading skill %s failed: %s", name, exc)
                skill_event("activation_failed", self.id, skill=name, code=failure_code(exc))
                text = failure_text(f"loading skill '{name}'", exc)
                return self._result(call, text, resolved={"command": name})
            with self._lock:
                self._pending[name] = (source, skill)
                self._pinned[name] = source.signature
            self._activator.activate_policy(name, policy)
            skill_event("activated", self.id, skill=name, skill_uri=uri, remote_first=True)
        content = (
            f"Runtime: {self._tools.runtime.name}\n"
            f"Skill location: {uri} (remote: refer to its files by their relative paths; they "
            "are fetched when a tool needs them)\n\n"
            f"{skill.body.lstrip(chr(10))}"
        )
        uris = [uri] if uri else []
        return self._result(call, content, skill_uris=uris, resolved={"command": name})

    def _pending_requirements(self) -> str | None:
        """Check, once per turn, the ``metadata.requires`` of every active remote skill not
        materialized yet, before the first tool call it takes part in (inside the runtime; a
        skill without requirements runs nothing). An ``Error: SKILL_CAPABILITY_UNAVAILABLE``
        text, or ``None``."""
        with self._lock:
            unchecked = [
                (name, skill)
                for name, (_, skill) in self._pending.items()
                if name not in self._requirements_met
            ]
        for name, skill in unchecked:
            requirements = SkillPolicy.from_skill(skill).requirements
            try:
                missing = check_requirements(self._tools.runtime, requirements)
            except Exception as exc:
                return f"Error: checking the requirements of skill '{name}' failed: {exc}"
            if missing:
                return (
                    f"Error: {SKILL_CAPABILITY_UNAVAILABLE}: skill '{name}' cannot be used: "
                    f"missing in the {self._tools.runtime.name} runtime: {', '.join(missing)}"
                )
            with self._lock:
                self._requirements_met.add(name)
        return None

    def _materialize(self, name: str) -> str:
        """Make a remote-first skill's package local (once per turn); its base path."""
        with self._materialize_lock:
            if name in self._pending:
                self._check_pin(name)
                content = self._activator.activate(name)  # load, prepare, requirements
                if content.startswith("Error:"):
                    error = materialization_error(name, content, self._activator.failure(name))
                    if error.code == SKILL_REVISION_CHANGED:
                        self._drop_pending(name)
                    raise error
                uri = self.skill_uri(name)
                if uri is not None and self._uses_copy(uri):
                    try:
                        self._copy(name, uri)
                    except Exception as exc:
                        raise ResourceError(SKILL_MATERIALIZATION_FAILED, str(exc)) from exc
                with self._lock:
                    self._pending.pop(name, None)
                    self._files.pop(name, None)
                skill_event("materialized", self.id, skill=name, skill_uri=uri)
            base = self.base_directory(name)
            if base is None:
                raise ResourceError(SKILL_MATERIALIZATION_FAILED, f"skill {name!r} is not ready")
            return base

    def _remote_read(self, call: ToolCall, arguments: dict[str, Any]) -> ToolResult | None:
        """Serve a ``read`` of a file of a not yet materialized remote skill from the server."""
        value = arguments.get("file_path")
        if not isinstance(value, str) or not self._pending:
            return None
        resolver = ResourceResolver(
            self.active_resources(), lambda path: False, inactive_roots=self._inactive_roots()
        )
        try:
            located = resolver.locate(value)
        except ResourceError:
            return None  # not a remote text: the ordinary resolution decides and reports
        if located is None or located[0].name not in self._pending:
            return None
        skill, relative = located
        source = self._pending[skill.name][0]
        location = f"{skill.uri.rstrip('/')}/{relative}"
        resolved = {**arguments, "file_path": location}
        try:
            self._check_pin(skill.name)
            data = source.read_resource(relative)
        except ResourceError as exc:  # the pin moved; the skill was dropped
            return self._result(call, f"Error: {exc}", resolved=resolved)
        except Exception as exc:
            code = failure_code(exc)
            if code == SKILL_REVISION_CHANGED:
                self._drop_pending(skill.name)
                return self._result(
                    call, f"Error: {revision_changed(skill.name, exc)}", resolved=resolved
                )
            prefix = f"{code}: " if code is not None else ""
            return self._result(call, f"Error: {prefix}{exc}", resolved=resolved)
        skill_event("remote_read", self.id, skill=skill.name, skill_uri=skill.uri)
        content = format_text_read(location, data, arguments.get("offset"), arguments.get("limit"))
        return self._result(call, content, skill_uris=[skill.uri], resolved=resolved)

    def _check_pin(self, name: str) -> None:
        """Refuse (``SKILL_REVISION_CHANGED``, entry dropped) when the source of the pending
        skill ``name`` no longer holds the revision pinned at its activation in this turn."""
        source = self._pending[name][0]
        if source.signature != self._pinned.get(name):
            self._drop_pending(name, end_source=False)  # the other pin is not this turn's
            raise revision_changed(name, "the source was activated again elsewhere")

    def _drop_pending(self, name: str, *, end_source: bool = True) -> None:
        """Forget the remote skill ``name`` activated in this turn (its revision changed): it
        is deactivated and (with ``end_source``) its source's turn ended, so the next ``skill``
        call reads it again."""
        with self._lock:
            pending = self._pending.pop(name, None)
            self._pinned.pop(name, None)
            self._files.pop(name, None)
            self._requirements_met.discard(name)
        self._activator.deactivate(name)
        skill_event("revision_changed", self.id, skill=name, skill_uri=self.skill_uri(name))
        ender = getattr(pending[0], "end_turn", None) if pending and end_source else None
        if callable(ender):
            try:
                ender()
            except Exception as exc:
                logger.warning("ending the turn of skill %s failed: %s", name, exc)

    # ------------------------------------------------------------- resources

    def active_resources(self) -> list[ActiveResources]:
        """The active skills with their prepared base paths and file lists."""
        resources: list[ActiveResources] = []
        for name in self._activator.active_names():
            pending = self._pending.get(name)
            if pending is not None:
                location = self.skill_uri(name) or name
                resources.append(
                    ActiveResources(
                        name,
                        location,
                        "",
                        pending[0].package_files,
                        materialize=functools.partial(self._materialize, name),
                    )
                )
                continue
            prepared = self._activator.prepared(name)
            loaded = self._activator.loaded(name)
            source = self._activator.source(name)
            if prepared is None or loaded is None or source is None:
                continue
            with self._lock:
                files = self._files.get(name)
            if files is None:
                files = _skill_files(loaded.base_path)
                with self._lock:
                    self._files[name] = files
            base = self._copies.paths.get(source.location, prepared.base_path)
            resources.append(ActiveResources(name, source.location, base, files))
        return resources

    def _uses_copy(self, uri: str) -> bool:
        if self._turn_copies is None:
            return uri.startswith("viking://")
        return self._turn_copies

    def base_directory(self, name: str) -> str | None:
        """Where skill ``name`` runs in this turn: its turn copy, else its prepared copy."""
        source = self._activator.source(name)
        prepared = self._activator.prepared(name)
        if source is None or prepared is None or name not in self._activator.active_names():
            return None
        return self._copies.paths.get(source.location, prepared.base_path)

    def _inactive_roots(self) -> dict[str, str]:
        active = set(self._activator.active_names())
        roots: dict[str, str] = {}
        for name in self._activator.names:
            source = self._activator.source(name)
            if (
                name not in active
                and source is not None
                and source.location.startswith("viking://")
            ):
                roots[source.location.rstrip("/")] = name
        return roots

    def _resolve(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        runtime = self._tools.runtime
        working = arguments.get("working_directory") if tool == "bash" else None
        base = runtime.default_working_directory
        if isinstance(working, str) and working.strip():
            base = working if working.startswith("/") else posixpath.join(base, working)

        def workspace_has(path: str) -> bool:
            try:
                return runtime.get_file_system().exists(posixpath.join(base, path))
            except Exception as exc:  # an unreachable workspace holds nothing we can vouch for
                logger.info("checking the workspace for %s failed: %s", path, exc)
                return False

        resolver = ResourceResolver(
            self.active_resources(), workspace_has, inactive_roots=self._inactive_roots()
        )
        resolved = dict(arguments)
        if tool == "bash" and isinstance(arguments.get("command"), str):
            resolved["command"] = resolver.resolve_command(arguments["command"])
        inputs = self._inputs.get(tool)
        if inputs:
            resolved = resolver.resolve_arguments(resolved, inputs)
        return resolved, list(resolver.referenced)

    # ----------------------------------------------------------------- session

    def _skill_reference(self, uri: str) -> str:
        """A canonical skill reference: a ``viking://`` URI as is, a local skill's name."""
        if uri.startswith("viking://"):
            return uri
        for name in self._activator.names:
            source = self._activator.source(name)
            if source is not None and source.location == uri:
                return name
        return posixpath.basename(uri.rstrip("/\\").replace("\\", "/")) or uri

    def _session_call(self, result: ToolResult) -> TurnToolCall:
        """What a session may keep of ``result`` (its persisted view, skills made canonical)."""
        view = result.persisted_view()
        output = view.get("content")
        return TurnToolCall(
            call_id=result.call_id,
            tool=result.usage.tool,
            status=result.usage.status,
            code=result.usage.code,
            cause=result.usage.cause,
            skills=tuple(
                dict.fromkeys(self._skill_reference(uri) for uri in result.usage.skill_uris)
            ),
            arguments=view.get("resolved_args"),
            output=output if isinstance(output, str) else None,
        )

    @property
    def calls(self) -> list[TurnToolCall]:
        """The session records of this turn's calls, in completion order."""
        with self._lock:
            return list(self._calls)

    @property
    def session_outcome(self) -> SessionOutcome | None:
        """The outcome of :meth:`record_session`, once it ran."""
        return self._session_outcome

    def record(self, *, user_message: str, answer: str) -> TurnRecord:
        """The turn's :class:`~.turn_record.TurnRecord`: its calls so far, the user message and
        the answer with secrets redacted."""
        return TurnRecord(
            turn_id=self.id,
            user_message=redact_text(user_message),
            answer=redact_text(answer),
            calls=tuple(self.calls),
        )

    def record_session(
        self, sink: TurnSessionSink, *, user_message: str, answer: str
    ) -> SessionOutcome:
        """Store the turn in a session (``docs/agent-turn.md``: after the last call, before the
        completion event and :meth:`close`); never raises. A sink that raises gives a failed outcome
        naming the exception's type. The outcome is kept in :attr:`session_outcome` and logged
        (``skill_event="session_recorded"`` or ``"session_failed"``)."""
        record = self.record(user_message=user_message, answer=answer)
        try:
            outcome = sink.record_turn(record)
        except Exception as exc:
            outcome = self._sink_failed(exc)
        return self._session_recorded(outcome)

    async def arecord_session(
        self,
        sink: TurnSessionSink | AsyncTurnSessionSink,
        *,
        user_message: str,
        answer: str,
        timeout_seconds: float | None = None,
    ) -> SessionOutcome:
        """:meth:`record_session` for asyncio code; never raises (cancellation aside).

        An :class:`~.turn_record.AsyncTurnSessionSink` (``async def arecord_turn``) is awaited
        on the loop. A sync sink (``record_turn``, e.g. the OpenViking sink) runs in a worker
        thread of the loop's default executor, as :meth:`adispatch_batch` runs the calls: the
        session sinks here talk HTTP through a blocking, thread-safe client whose retries are
        already bounded by the sink's own deadline, so one implementation (and one memory of
        stored turn ids) serves both faces, and the loop is never blocked. ``timeout_seconds``
        bounds the wait on top of that: past it the outcome is
        ``SESSION_WRITE_FAILED: no outcome within …`` and the worker thread is left to finish
        (the write may still land; it is idempotent per turn id, so recording the turn again
        later adds nothing twice)."""
        record = self.record(user_message=user_message, answer=answer)
        try:
            if isinstance(sink, AsyncTurnSessionSink):
                pending = sink.arecord_turn(record)
            else:
                pending = asyncio.to_thread(sink.record_turn, record)
            if timeout_seconds is None:
                outcome = await pending
            else:
                outcome = await asyncio.wait_for(pending, timeout_seconds)
        except TimeoutError as exc:
            if timeout_seconds is None:  # the sink's own timeout
                outcome = self._sink_failed(exc)
            else:
                logger.warning("recording turn %s: no outcome in %gs", self.id, timeout_seconds)
                outcome = SessionOutcome(
                    error=f"SESSION_WRITE_FAILED: no outcome within {timeout_seconds:g}s"
                )
        except Exception as exc:
            outcome = self._sink_failed(exc)
        return self._session_recorded(outcome)

    def _sink_failed(self, exc: Exception) -> SessionOutcome:
        logger.warning("recording turn %s failed: %s", self.id, type(exc).__name__)
        return SessionOutcome(error=f"SESSION_WRITE_FAILED: {type(exc).__name__}")

    def _session_recorded(self, outcome: SessionOutcome) -> SessionOutcome:
        self._session_outcome = outcome
        skill_event(
            "session_recorded" if outcome.ok else "session_failed",
            self.id,
            session_id=outcome.session_id,
            written=outcome.written,
            duplicate=outcome.duplicate,
            committed=outcome.committed,
            code=(outcome.error or outcome.commit_error or "").partition(":")[0] or None,
        )
        return outcome

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """End the turn (idempotent): drop its state and end the turn of every source it
        loaded (``source.end_turn()``, e.g. releasing an artifact lease). Failures are logged;
        every source is still ended."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            for name in self._activator.names:
                if self._activator.loaded(name) is None and name not in self._pending:
                    continue
                source = self._activator.source(name)
                ender = getattr(source, "end_turn", None)
                if callable(ender):
                    try:
                        ender()
                    except Exception as exc:
                        logger.warning("ending the turn of skill %s failed: %s", name, exc)
        finally:
            self._copies.close()
            self._activator.reset()
            self._tools.end_turn(self)
            skill_event("turn_closed", self.id, calls=len(self._usage))
