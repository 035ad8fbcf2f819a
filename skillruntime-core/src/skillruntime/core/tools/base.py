"""The framework-neutral tool object and its argument handling.

A :class:`SkillTool` has a ``name``, a ``description``, a JSON Schema of its arguments
(``parameters``, generated from a pydantic model, required fields really required) and
``invoke(arguments) -> str`` (``await ainvoke(arguments)`` from asyncio code). ``invoke`` never
raises: invalid arguments, refused calls and failures all come back as strings starting with
``Error:``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ValidationError

__all__ = [
    "ArgumentsError",
    "AsyncHandler",
    "AsyncSkillTool",
    "Guard",
    "Handler",
    "SkillTool",
    "arguments_schema",
    "parse_arguments",
]

logger = logging.getLogger(__name__)

Guard = Callable[[str, Mapping[str, Any]], "str | None"]
"""A policy check run before a tool: ``(tool name, validated arguments) -> refusal or None``."""

Handler = Callable[[Any], str]
"""The function a :class:`SkillTool` runs on its validated arguments."""

AsyncHandler = Callable[[Any], Awaitable[str]]
"""The coroutine function an :class:`AsyncSkillTool` runs on its validated arguments."""


class ArgumentsError(ValueError):
    """The arguments of a tool call are not valid JSON or do not fit the tool's schema."""


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        node = {key: _clean(value) for key, value in node.items() if key != "title"}
        variants = node.get("anyOf")
        if isinstance(variants, list) and len(variants) == 2 and {"type": "null"} in variants:
            other = next(item for item in variants if item != {"type": "null"})
            node.pop("anyOf")
            if node.get("default", ...) is None:
                node.pop("default")
            node = {**other, **node}
        return node
    if isinstance(node, list):
        return [_clean(item) for item in node]
    return node


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``model`` as a tool's ``parameters``.

    Titles are dropped and ``Optional[X] = None`` fields become plain ``X`` (an omitted argument
    means "use the default"), which keeps schemas small and readable for models.
    """
    schema = _clean(model.model_json_schema(mode="validation"))
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    schema["type"] = "object"
    schema["additionalProperties"] = False
    return dict(schema)


@functools.cache
def _shared_arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """:func:`arguments_schema` of ``model``, generated once per model class and shared by every
    tool built on it (pydantic's schema generation costs about a millisecond, and toolsets are
    built per runtime). Never to be mutated: :attr:`SkillTool.parameters` hands out deep
    copies."""
    return arguments_schema(model)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(item) for item in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


@functools.cache
def _required_keys(model: type[BaseModel]) -> frozenset[str]:
    """The names (and string aliases) of the required fields of ``model``, computed once."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        if field.is_required():
            keys.add(name)
            alias = field.validation_alias
            if isinstance(alias, str):
                keys.add(alias)
            elif isinstance(alias, AliasChoices):
                keys.update(choice for choice in alias.choices if isinstance(choice, str))
    return frozenset(keys)


def parse_arguments(model: type[BaseModel], arguments: Mapping[str, Any] | str | None) -> Any:
    """Validate ``arguments`` (a mapping or a JSON object string) into ``model``.

    ``null`` for an optional argument means "use its default" (strict-mode schemas make every
    optional argument nullable); ``null`` for a required one is refused. Raises
    :class:`ArgumentsError` with a message fit for the model.
    """
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        data: Any = {}
    elif isinstance(arguments, str):
        try:
            data = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ArgumentsError(f"arguments are not valid JSON: {exc.msg}") from exc
    else:
        data = dict(arguments)
    if not isinstance(data, dict):
        raise ArgumentsError("arguments must be a JSON object")
    required = _required_keys(model)
    data = {key: value for key, value in data.items() if value is not None or key in required}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ArgumentsError(_validation_message(exc)) from exc


class SkillTool:
    """One model-facing tool.

    ``handler`` receives the validated arguments model and returns the result text; it may raise,
    in which case ``invoke`` returns ``Error: <message>``. ``guard`` (optional) may refuse a call
    after validation and before the handler runs.
    """

    def __init__(
        self,
        name: str,
        description: str,
        arguments_model: type[BaseModel],
        handler: Handler,
        *,
        guard: Guard | None = None,
        error_prefix: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.arguments_model = arguments_model
        self._handler = handler
        self._guard = guard
        self._error_prefix = error_prefix or f"Error running {name}"
        self._schema = _shared_arguments_schema(arguments_model)

    def __repr__(self) -> str:
        return f"SkillTool({self.name!r})"

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments (a fresh copy each time)."""
        return copy.deepcopy(self._schema)

    def invoke(self, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run the tool with a mapping or a JSON string; the result or an ``Error: …`` string."""
        return self.run(arguments)

    async def ainvoke(self, arguments: Mapping[str, Any] | str | None = None) -> str:
        """:meth:`invoke` for asyncio code, run in a worker thread of the loop's default executor
        (size it with ``loop.set_default_executor``). A cancelled await does not stop the call."""
        return await asyncio.to_thread(self.run, arguments)

    def run(self, arguments: Mapping[str, Any] | str | None = None) -> str:
        """The body of :meth:`invoke` and :meth:`ainvoke` (never raises)."""
        checked = self.checked_arguments(arguments)
        if isinstance(checked, str):
            return checked
        return self.run_checked(checked)

    def run_checked(self, parsed: Any) -> str:
        """Run the handler on arguments already validated (and, where it applies, allowed by
        the guard); the result or the ``Error: …`` text of a handler that raised (never
        raises)."""
        try:
            return self._handler(parsed)
        except Exception as exc:
            return self.failure_text(exc)

    def checked_arguments(self, arguments: Mapping[str, Any] | str | None) -> Any:
        """The validated arguments model, or the ``Error: …`` text of invalid arguments or of
        a call the guard refuses (shared by sync and async tools)."""
        try:
            parsed = parse_arguments(self.arguments_model, arguments)
        except ArgumentsError as exc:
            return f"Error: invalid arguments for tool '{self.name}': {exc}"
        if self._guard is not None:
            try:
                refusal = self._guard(self.name, parsed.model_dump())
            except Exception as exc:
                logger.warning("policy check of tool %s failed: %s", self.name, exc)
                return f"Error: the policy check of tool '{self.name}' failed: {exc}"
            if refusal is not None:
                return f"Error: {refusal}"
        return parsed

    def failure_text(self, exc: Exception) -> str:
        """The ``Error: …`` result of a handler that raised ``exc``."""
        logger.info("tool %s failed: %s: %s", self.name, type(exc).__name__, exc)
        message = str(exc) or type(exc).__name__
        return f"Error: {self._error_prefix}: {message}"


class AsyncSkillTool(SkillTool):
    """A tool whose handler is a coroutine function: await :meth:`ainvoke`.

    Name, description, schema, argument checks and guard are those of :class:`SkillTool`. The
    sync :meth:`invoke` cannot run it and returns an ``Error:`` text saying so.
    """

    def __init__(
        self,
        name: str,
        description: str,
        arguments_model: type[BaseModel],
        handler: AsyncHandler,
        *,
        guard: Guard | None = None,
        error_prefix: str | None = None,
    ) -> None:
        super().__init__(
            name,
            description,
            arguments_model,
            self._refuse_sync,
            guard=guard,
            error_prefix=error_prefix,
        )
        self._async_handler = handler

    def _refuse_sync(self, _: Any) -> str:
        raise RuntimeError("this tool belongs to an async tool set: await ainvoke() instead")

    async def ainvoke(self, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run the tool on the event loop; the result or an ``Error: …`` string (never raises,
        except :class:`asyncio.CancelledError` when the awaiting task is cancelled)."""
        checked = self.checked_arguments(arguments)
        if isinstance(checked, str):
            return checked
        try:
            return await self._async_handler(checked)
        except Exception as exc:
            return self.failure_text(exc)
