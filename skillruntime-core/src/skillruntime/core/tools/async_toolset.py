"""``AsyncSkillTools``: the model-facing tool set over one :class:`AsyncSkillRuntime`.

The twin of :class:`~skillruntime.core.tools.toolset.SkillTools` for asyncio programs: the same
nine tools, names, descriptions, JSON Schemas, argument checks, ``allowed-tools`` policy, limits
and result texts (shared through the helpers of the sync modules), but every handler awaits the
native async runtime, so a call holds no thread. The ``skill`` tool prepares a skill lazily on
its first use, once even under concurrent activations (an :class:`asyncio.Lock` per skill).

Two steps still run in a worker thread because their APIs are sync host code: loading a skill
source on its first activation (an artifact store may download it) and handing a file to a
:class:`~skillruntime.core.files.publishing.FilePublisher` (``publish_file``; the runtime file is
first spooled into a temporary file that stays in memory up to 4 MiB).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import tempfile
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, BinaryIO, cast

from pydantic import BaseModel

from ..conversations.leases import ConversationLeaseError
from ..errors import FileTooLargeError
from ..files.async_spi import AsyncSkillRuntimeFileSystem
from ..files.globbing import LISTING_LIMIT, GlobMatcher, WalkResult, walk_plan
from ..files.linear_regex import InvalidPatternError, LinearPattern
from ..files.publishing import FilePublisher, safe_file_name
from ..files.search import GrepEngine
from ..models import (
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillRuntimeConfig,
)
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.closing import Closeable
from .arguments import (
    BashArguments,
    EditArguments,
    GlobArguments,
    GrepArguments,
    LsArguments,
    PublishFileArguments,
    ReadArguments,
    SkillArguments,
    WriteArguments,
)
from .base import Guard, SkillTool
from .context import resolve_tool_path
from .files import (
    DEFAULT_READ_LINES,
    EDIT_DESCRIPTION,
    MAX_EDIT_BYTES,
    MAX_READ_BYTES,
    READ_DESCRIPTION,
    SNIPPET_CONTEXT,
    WRITE_DESCRIPTION,
    _numbered,
    _split_lines,
)
from .policy import (
    SkillPolicy,
    missing_requirements,
    requirements_request,
)
from .publish import DESCRIPTION as PUBLISH_DESCRIPTION
from .search import (
    GLOB_DESCRIPTION,
    GREP_DESCRIPTION,
    LS_DESCRIPTION,
    glob_answer,
    glob_query,
    grep_answer,
    grep_query,
    ls_answer,
    ls_bounds,
)
from .shell import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, format_result
from .shell import DESCRIPTION as BASH_DESCRIPTION
from .skill import (
    DEFAULT_DESCRIPTION_TEMPLATE,
    DEFAULT_LISTING_BUDGET,
    SKILLS_PLACEHOLDER,
    SkillSource,
    activation_text,
    failure_text,
    preparation_request,
    single_prepared,
    skills_xml,
)
from .tool_sets import (
    SkillInput,
    ToolSetView,
    checked_configs,
    checked_template,
    configured_sources,
)

__all__ = ["AsyncSkillTool", "AsyncSkillTools"]

logger = logging.getLogger(__name__)

_SPOOL_BYTES = 4 * 1024 * 1024

AsyncHandler = Callable[[Any], Awaitable[str]]


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


class _AsyncContext:
    """The async runtime the tools act on (its ``execute`` and file system only)."""

    def __init__(self, runtime: AsyncSkillRuntime) -> None:
        self.runtime = runtime

    @property
    def name(self) -> str:
        return self.runtime.name

    async def files(self) -> AsyncSkillRuntimeFileSystem:
        return await self.runtime.get_file_system()

    def resolve(self, path: str | None) -> str:
        return resolve_tool_path(self.runtime.default_working_directory, path)


async def _walk(
    files: AsyncSkillRuntimeFileSystem,
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    include_directories: bool,
    keep: Callable[[FileInfo], bool] | None = None,
) -> WalkResult:
    """:func:`~skillruntime.core.files.globbing.walk` over an async file system (the same
    plan, :func:`~skillruntime.core.files.globbing.walk_plan`, driven with awaited listings)."""
    plan = walk_plan(
        root, depth=depth, limit=limit, include_directories=include_directories, keep=keep
    )
    try:
        directory = next(plan)
        while True:
            directory = plan.send(await files.list_directory(directory, 1, LISTING_LIMIT))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class _Slot:
    __slots__ = ("lock", "policy", "prepared", "requirements_met")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.prepared: Skill | None = None
        self.policy: SkillPolicy | None = None
        self.requirements_met = False


class _AsyncActivator:
    """The async twin of :class:`~skillruntime.core.tools.skill.SkillActivator`."""

    def __init__(
        self,
        runtime: AsyncSkillRuntime,
        sources: Mapping[str, SkillSource],
        configs: Mapping[str, SkillRuntimeConfig],
    ) -> None:
        self._runtime = runtime
        self._sources = dict(sources)
        self._configs = dict(configs)
        self._slots = {name: _Slot() for name in self._sources}
        self._active: dict[str, SkillPolicy] = {}

    @property
    def names(self) -> list[str]:
        return list(self._sources)

    def active_policies(self) -> list[SkillPolicy]:
        return list(self._active.values())

    def active_names(self) -> list[str]:
        return list(self._active)

    def prepared(self, name: str) -> Skill | None:
        slot = self._slots.get(name)
        return slot.prepared if slot else None

    def reset(self) -> None:
        self._active.clear()
        for slot in self._slots.values():
            slot.requirements_met = False

    async def activate(self, name: str) -> str:
        source = self._sources.get(name)
        if source is None:
            available = ", ".join(self._sources) or "none"
            return f"Error: Skill not found: {name}. Available skills: {available}"
        slot = self._slots[name]
        runtime_name = self._runtime.name
        async with slot.lock:
            if slot.prepared is None:
                try:
                    skill = await asyncio.to_thread(source.load)
                    if skill.name != name:
                        raise ValueError(f"the source loaded a skill named '{skill.name}'")
                    policy = SkillPolicy.from_skill(skill)
                except Exception as exc:
                    logger.warning("loading skill %s failed: %s", name, exc)
                    return failure_text(f"loading skill '{name}'", exc)
                try:
                    request = preparation_request(skill, self._configs.get(skill.name))
                    slot.prepared = single_prepared(await self._runtime.prepare(request))
                except Exception as exc:
                    logger.warning("preparing skill %s failed: %s", name, exc)
                    return failure_text(
                        f"preparing skill '{name}' in the {runtime_name} runtime", exc
                    )
                slot.policy = policy
            assert slot.policy is not None
            if not slot.requirements_met:
                try:
                    missing = await self._missing(slot.policy)
                except Exception as exc:
                    return f"Error: checking the requirements of skill '{name}' failed: {exc}"
                if missing:
                    return (
                        f"Error: skill '{name}' cannot be used: missing in the {runtime_name} "
                        f"runtime: {', '.join(missing)}"
                    )
                slot.requirements_met = True
            self._active.setdefault(name, slot.policy)
            prepared = slot.prepared
        return activation_text(runtime_name, prepared)

    async def _missing(self, policy: SkillPolicy) -> list[str]:
        if not policy.requirements:
            return []
        result = await self._runtime.execute(requirements_request(policy.requirements))
        return missing_requirements(self._runtime.name, result)


def _tools(context: _AsyncContext, guard: Guard) -> list[AsyncSkillTool]:
    """The eight runtime tools (every one but ``skill`` and ``publish_file``)."""
    name = context.name

    async def existing_file(path: str) -> str | None:
        info = await (await context.files()).stat(path)
        if info is None:
            return f"Error: File does not exist in {name} runtime: {path}"
        if info.is_directory:
            return f"Error: Path is a directory, not a file: {path}"
        return None

    async def bash(arguments: BashArguments) -> str:
        timeout = min(arguments.timeout_seconds or DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
        working_directory = (
            context.resolve(arguments.working_directory) if arguments.working_directory else None
        )
        result = await context.runtime.execute(
            SkillExecutionRequest(
                command=arguments.command,
                working_directory=working_directory,
                timeout_seconds=timeout,
            )
        )
        return format_result(result.stdout, result.stderr, result.exit_code, result.timed_out)

    async def read(arguments: ReadArguments) -> str:
        path = context.resolve(arguments.file_path)
        problem = await existing_file(path)
        if problem:
            return problem
        try:
            text = await (await context.files()).read_text(path, MAX_READ_BYTES)
        except FileTooLargeError:
            return (
                f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {path}. "
                "Use bash (for example head, tail or sed -n) to read part of it."
            )
        lines = _split_lines(text)
        total = len(lines)
        start = arguments.offset or 1
        count = arguments.limit or DEFAULT_READ_LINES
        if start > total:
            if total == 0:
                return f"File is empty: {path}"
            return f"No lines to read. File has {total} lines, but offset was {start}"
        end = min(total, start + count - 1)
        header = f"File: {path}\nShowing lines {start}-{end} of {total}\n\n"
        return header + _numbered(lines[start - 1 : end], start)

    async def write(arguments: WriteArguments) -> str:
        path = context.resolve(arguments.file_path)
        files = await context.files()
        info = await files.stat(path)
        if info is not None and info.is_directory:
            return f"Error: Path is a directory, not a file: {path}"
        size = await files.write_text(path, arguments.content)
        verb = "overwrote" if info is not None else "created"
        return f"Successfully {verb} file in {name} runtime: {path} ({size} bytes)"

    async def edit(arguments: EditArguments) -> str:
        old, new = arguments.old_string, arguments.new_string
        if not old:
            return "Error: old_string must not be empty"
        if old == new:
            return "Error: old_string and new_string must be different"
        path = context.resolve(arguments.file_path)
        problem = await existing_file(path)
        if problem:
            return problem
        files = await context.files()
        try:
            text = await files.read_text(path, MAX_EDIT_BYTES)
        except FileTooLargeError:
            return f"Error: File is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB: {path}"
        occurrences = text.count(old)
        if occurrences == 0:
            return f"Error: old_string not found in file: {path}"
        if occurrences > 1 and not arguments.replace_all:
            return (
                f"Error: old_string appears {occurrences} times. Use a more specific string or "
                "set replace_all=true."
            )
        first = text.index(old)
        updated = text.replace(old, new) if arguments.replace_all else text.replace(old, new, 1)
        await files.write_text(path, updated)
        lines = _split_lines(updated)
        first_line = text.count("\n", 0, first)
        last_line = updated.count("\n", 0, max(first, first + len(new) - 1))
        start = max(0, first_line - SNIPPET_CONTEXT)
        end = min(len(lines), last_line + SNIPPET_CONTEXT + 1)
        replaced = f"{occurrences} occurrences" if arguments.replace_all else "1 occurrence"
        return (
            f"The file {path} was updated in {name} runtime ({replaced} replaced).\n"
            + _numbered(lines[start:end], start + 1)
        )

    async def search_root(path: str | None) -> tuple[str, FileInfo | None]:
        root = context.resolve(path)
        return root, await (await context.files()).stat(root)

    async def ls(arguments: LsArguments) -> str:
        root, info = await search_root(arguments.path)
        if info is None:
            return f"Error: Path does not exist in {name} runtime: {root}"
        depth, limit = ls_bounds(arguments)
        result = await _walk(
            await context.files(), info, depth=depth, limit=limit, include_directories=True
        )
        return ls_answer(root, result, limit)

    async def glob(arguments: GlobArguments) -> str:
        if not arguments.pattern.strip():
            return "Error: The glob pattern must not be empty"
        try:
            GlobMatcher(arguments.pattern)
        except ValueError as exc:
            return f"Error: Invalid glob pattern: {exc}"
        root, info = await search_root(arguments.path)
        if info is None:
            return f"Error: Path does not exist in {name} runtime: {root}"
        files = await context.files()
        return glob_answer(arguments, await files.glob(info, glob_query(arguments)))

    async def grep(arguments: GrepArguments) -> str:
        try:
            LinearPattern(
                arguments.pattern,
                case_insensitive=bool(arguments.case_insensitive),
                dot_matches_newline=bool(arguments.multiline),
            )
        except InvalidPatternError as exc:
            return f"Error: Invalid regex pattern: {exc}"
        root, info = await search_root(arguments.path)
        if info is None:
            return f"Error: Path does not exist in {name} runtime: {root}"
        query = grep_query(arguments)
        try:
            GrepEngine(query, root)
        except ValueError as exc:
            return f"Error: Invalid glob pattern: {exc}"
        files = await context.files()
        return grep_answer(arguments, await files.grep(info, query))

    def tool(
        tool_name: str, description: str, model: type[BaseModel], handler: Any, what: str
    ) -> AsyncSkillTool:
        return AsyncSkillTool(
            tool_name, description, model, handler, guard=guard, error_prefix=what
        )

    return [
        tool(
            "bash",
            BASH_DESCRIPTION,
            BashArguments,
            bash,
            f"running the command in the {name} runtime failed",
        ),
        tool(
            "read",
            READ_DESCRIPTION,
            ReadArguments,
            read,
            f"reading the file from the {name} runtime failed",
        ),
        tool(
            "write",
            WRITE_DESCRIPTION,
            WriteArguments,
            write,
            f"writing the file in the {name} runtime failed",
        ),
        tool(
            "edit",
            EDIT_DESCRIPTION,
            EditArguments,
            edit,
            f"editing the file in the {name} runtime failed",
        ),
        tool("ls", LS_DESCRIPTION, LsArguments, ls, f"listing in the {name} runtime failed"),
        tool("glob", GLOB_DESCRIPTION, GlobArguments, glob, f"glob in the {name} runtime failed"),
        tool("grep", GREP_DESCRIPTION, GrepArguments, grep, f"grep in the {name} runtime failed"),
    ]


def _publish_tool(context: _AsyncContext, publisher: FilePublisher, guard: Guard) -> AsyncSkillTool:
    name = context.name

    async def publish(arguments: PublishFileArguments) -> str:
        path = context.resolve(arguments.file_path)
        files = await context.files()
        info = await files.stat(path)
        if info is None:
            return f"Error: File does not exist in {name} runtime: {path}"
        if info.is_directory:
            return f"Error: Only regular files can be published: {path}"
        file_name = safe_file_name(arguments.file_name or path)
        content_type = (
            (arguments.content_type or "").strip()
            or mimetypes.guess_type(file_name)[0]
            or "application/octet-stream"
        )
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
        lines = [
            "File published successfully.",
            f"URL: {published.url}",
            f"File name: {file_name}",
            f"Content type: {content_type}",
            f"Size: {size} bytes",
        ]
        if published.expires_at is not None:
            lines.append(f"Expires at: {published.expires_at.isoformat()}")
        return "\n".join(lines)

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
        if exclusive and not getattr(runtime, "exclusive", False):
            raise ValueError(
                "AsyncSkillTools(exclusive=True) needs a runtime built with exclusive=True "
                "(a conversation with a conversation store)"
            )
        self.exclusive = exclusive
        checked_template(description_template)
        sources = configured_sources(skills)
        configs = checked_configs(configs, sources)
        self.runtime = runtime
        self.publisher = publisher
        self._sources = sources
        self._always_allowed = frozenset(always_allowed)
        self._activator = _AsyncActivator(runtime, sources, configs)
        context = _AsyncContext(runtime)
        description = description_template.replace(
            SKILLS_PLACEHOLDER, skills_xml(list(sources.values()), listing_budget)
        )
        activator = self._activator
        built = [
            AsyncSkillTool(
                "skill",
                description,
                SkillArguments,
                lambda arguments: activator.activate(arguments.command.strip()),
                error_prefix="running the skill tool failed",
            ),
            *_tools(context, self._guard),
        ]
        if publisher is not None:
            built.append(_publish_tool(context, publisher, self._guard))
        self._tools = {tool.name: tool for tool in built}

    def _activations(self) -> _AsyncActivator:
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
