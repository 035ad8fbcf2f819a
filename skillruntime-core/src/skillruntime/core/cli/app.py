"""The ``skillruntime`` command: list runtimes, check skills, run commands, move files.

Errors are printed as one ``Error: ...`` line on stderr with exit status 2 for usage mistakes
(bad options) and 1 for failures; ``--debug`` shows the traceback and debug logging instead.
Installed plugins add commands through the ``skillruntime.cli`` entry points (imported only when
the command runs) or the older ``skillruntime_cli`` hook.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from .._version import __version__

if TYPE_CHECKING:
    from ..plugins.listings import RuntimeListing

__all__ = [
    "BUILTIN_COMMANDS",
    "CLI_ENTRY_POINT_GROUP",
    "COMMAND_SUMMARIES",
    "SkillRuntimeGroup",
    "UsageLine",
    "build_cli",
    "cli",
    "main",
]

logger = logging.getLogger(__name__)


BUILTIN_COMMANDS: dict[str, str] = {
    "skills": "skillruntime.core.cli.skills:skills_group",
    "exec": "skillruntime.core.cli.runtime:exec_command",
    "files": "skillruntime.core.cli.runtime:files_group",
    "artifacts": "skillruntime.core.artifacts.cli:artifacts_group",
}
"""Built-in commands defined outside this module, by name: imported only when invoked."""

COMMAND_SUMMARIES: dict[str, str] = {
    "skillruntime.core.cli.skills:skills_group": (
        "Check and list skill directories (folders with a SKILL.md)."
    ),
    "skillruntime.core.cli.runtime:exec_command": (
        "Run COMMAND in a runtime, after preparing skills."
    ),
    "skillruntime.core.cli.runtime:files_group": "Move files in and out of a runtime.",
    "skillruntime.core.artifacts.cli:artifacts_group": (
        "Install, list, delete and materialize skill artifacts (ZIP packages) in a store."
    ),
    "skillruntime.core.conversations.plugin:conversations_group": (
        "Manage the SQL table of the conversation store."
    ),
}
"""What ``skillruntime --help`` shows of the core's lazily imported commands (the built-ins and
the core's own :data:`CLI_ENTRY_POINT_GROUP` entry points), by ``module:attribute``, so listing
them imports none of them; tests/cli/test_cli_startup.py checks each against the command's own
short help.
"""

CLI_ENTRY_POINT_GROUP = "skillruntime.cli"
"""Entry-point group of plugin commands: ``name = "module:attribute"`` naming a click command.

A command declared here is imported only when it is invoked, so an installed plugin costs
nothing when another command runs; ``skillruntime --help`` lists it with its distribution's
summary (static metadata) without importing it. The older ``skillruntime_cli`` hook still works;
its plugins are loaded only for a name no built-in or entry point serves (help does not list
their commands: loading every plugin would make help slow).
"""


def _load_command(target: str, name: str) -> click.Command:
    module_name, _, attribute = target.partition(":")
    try:
        command = getattr(importlib.import_module(module_name), attribute)
    except Exception as error:  # a broken plugin must not break other commands
        raise click.ClickException(
            f"the command {name!r} ({target}) failed to load: {type(error).__name__}: {error}"
        ) from None
    if not isinstance(command, click.Command):
        raise click.ClickException(
            f"the command {name!r} ({target}) is {type(command).__name__}, not a click command"
        )
    return command


def _entry_point_commands() -> dict[str, str]:
    import importlib.metadata

    return {
        entry_point.name: entry_point.value
        for entry_point in importlib.metadata.entry_points(group=CLI_ENTRY_POINT_GROUP)
    }


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word to at most ``limit`` characters, ``...`` marking the cut."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 3, 0)].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "..."


def _entry_point_summaries() -> dict[str, str]:
    """What help shows of each entry-point command: its distribution's summary and name (read
    from the installed metadata, nothing imported)."""
    import importlib.metadata

    summaries: dict[str, str] = {}
    for entry_point in importlib.metadata.entry_points(group=CLI_ENTRY_POINT_GROUP):
        dist = entry_point.dist
        if dist is None:
            continue
        summary = ((dist.metadata.get_all("Summary") or [""])[0] or "").strip()
        summaries[entry_point.name] = f"{summary} [{dist.name}]" if summary else f"[{dist.name}]"
    return summaries


class SkillRuntimeGroup(click.Group):
    """The root group: turns library errors into short messages unless ``--debug`` is given.

    ``lazy_commands`` maps names to ``"module:attribute"`` commands imported on first use. With
    ``plugins=True`` the group also serves the commands plugins declare in the
    :data:`CLI_ENTRY_POINT_GROUP` entry points (lazily) and through the ``skillruntime_cli`` hook
    (loading every plugin, only when needed). A plugin command never replaces a built-in one: a
    clash is logged and the plugin's command is dropped.
    """

    def __init__(
        self,
        *args: Any,
        lazy_commands: Mapping[str, str] | None = None,
        plugins: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.plugins = plugins
        self._plugin_commands: dict[str, str] | None = None
        self._hook_loaded = False
        self._summaries: dict[str, str] | None = None

    def _builtin(self, name: str) -> bool:
        return name in self.commands or name in self.lazy_commands

    def _declared(self) -> dict[str, str]:
        if not self.plugins:
            return {}
        if self._plugin_commands is None:
            declared: dict[str, str] = {}
            for name, target in _entry_point_commands().items():
                if self._builtin(name):
                    logger.warning(
                        "a plugin tried to replace the built-in command %r; ignored", name
                    )
                    continue
                declared[name] = target
            self._plugin_commands = declared
        return self._plugin_commands

    def _load_hook(self) -> None:
        if not self.plugins or self._hook_loaded:
            return
        self._hook_loaded = True
        from ..plugins.registry import register_cli_commands

        scratch = click.Group("plugins")
        register_cli_commands(scratch)
        declared = self._declared()
        for name, command in scratch.commands.items():
            if self._builtin(name):
                logger.warning("a plugin tried to replace the built-in command %r; ignored", name)
                continue
            if name in declared:
                continue  # the same command declared as an entry point too: that one serves it
            self.add_command(command, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Loaded, built-in and entry-point commands; not those only the older
        ``skillruntime_cli`` hook adds before one of them is looked up."""
        return sorted(set(self.commands) | set(self.lazy_commands) | set(self._declared()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is not None:
            return command
        target = self.lazy_commands.get(cmd_name) or self._declared().get(cmd_name)
        if target is None:
            self._load_hook()
            return self.commands.get(cmd_name)
        command = _load_command(target, cmd_name)
        self.add_command(command, cmd_name)
        return command

    def _summary(self, name: str) -> str:
        """The help line of a command that is not loaded, from static data."""
        target = self.lazy_commands.get(name) or self._declared().get(name)
        if target in COMMAND_SUMMARIES:
            return COMMAND_SUMMARIES[target]
        if self._summaries is None:
            self._summaries = _entry_point_summaries() if self.plugins else {}
        return self._summaries.get(name, "")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands without importing any: a command not loaded yet is shown with its
        static summary (:data:`COMMAND_SUMMARIES`, or its distribution's summary)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                summary = _shorten(self._summary(name), limit)
                rows.append((name, summary))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            raise _one_line(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            raise _one_line(error) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            if ctx.params.get("debug"):
                raise
            from .errors import as_cli_error

            raise as_cli_error(error) from None


class UsageLine(click.ClickException):
    """A usage mistake shown as one ``Error: ...`` line (exit status 2), the help hint inside it.

    click prints a usage error as four lines (usage, hint, blank line, error); the root group
    turns every :class:`click.UsageError` into this one-line form.
    """

    exit_code = 2


def _one_line(error: click.UsageError) -> click.ClickException:
    if isinstance(error, click.exceptions.NoArgsIsHelpError):
        return error  # help for a bare group is the answer, not an error line
    path = error.ctx.command_path if error.ctx is not None else "skillruntime"
    return UsageLine(f"{error.format_message().rstrip('.')} (see '{path} --help')")


_LOG_FORMAT = "skillruntime: %(levelname)s: %(name)s: %(message)s"


class _LibraryLogFilter(logging.Filter):
    """Passes the project's records at the handler's level, other libraries' from ERROR up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.partition(".")[0] == "skillruntime"


class _OneLineFormatter(logging.Formatter):
    """Formats a record as one line: a logged exception is summed up by its type and message
    (the last of a chain, the first cause in brackets), never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            summary = f"{type(error).__name__}: {error}"
            cause = error.__cause__ or error.__context__
            while cause is not None and (cause.__cause__ or cause.__context__) is not None:
                cause = cause.__cause__ or cause.__context__
            if cause is not None and str(cause) and str(cause) not in str(error):
                summary += f" (caused by {type(cause).__name__}: {cause})"
            record = logging.makeLogRecord(
                {
                    **record.__dict__,
                    "msg": f"{record.getMessage()}: {summary}",
                    "args": None,
                    "exc_info": None,
                    "exc_text": None,
                    "stack_info": None,
                }
            )
        return " ".join(super().format(record).splitlines())


def _configure_logging(debug: bool) -> None:
    """Log warnings of skillruntime and errors of other libraries (an SDK's retry warnings are
    noise next to the command's own ``Error:`` line), each record on one line with no traceback;
    ``--debug`` logs everything, tracebacks included."""
    root = logging.getLogger()
    if root.handlers:
        root.setLevel(logging.DEBUG if debug else root.level)
        return
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format=_LOG_FORMAT,
    )
    if not debug:
        for handler in root.handlers:
            handler.addFilter(_LibraryLogFilter())
            handler.setFormatter(_OneLineFormatter(_LOG_FORMAT))


@click.group(
    cls=SkillRuntimeGroup,
    lazy_commands=BUILTIN_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="skillruntime")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
def cli(debug: bool) -> None:
    """One execution boundary for Agent Skills.

    Run skill commands and manage files in any installed runtime backend (the host, an
    OpenSandbox container, an AIO sandbox, ...). Backends are separate distributions, e.g.
    `pip install skillruntime-local`; `skillruntime runtimes` lists the installed ones.
    """
    _configure_logging(debug)


# ------------------------------------------------------------------------------ runtimes


def _provider_json(provider: RuntimeListing) -> dict[str, Any]:
    return {
        "name": provider.name,
        "description": provider.description,
        "distribution": provider.distribution,
        "options": [dataclasses.asdict(info) for info in provider.options],
    }


@cli.command("runtimes")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def runtimes_command(as_json: bool) -> None:
    """List installed runtime backends and their options.

    Each option can be given as `--option NAME=VALUE` (or to `create_runtime`) or through the
    environment variable shown.
    """
    from ..plugins.registry import plugin_problems, runtime_listings

    providers = runtime_listings()
    for problem in plugin_problems():
        origin = f" ({problem.distribution})" if problem.distribution else ""
        click.echo(f"Warning: plugin {problem.plugin}{origin} {problem.message}", err=True)
    if as_json:
        click.echo(json.dumps([_provider_json(p) for p in providers.values()], indent=2))
        return
    if not providers:
        click.echo(
            "No runtimes installed. Install a backend, e.g.: pip install skillruntime-local "
            "(from a clone of the repository: pip install ./skillruntime-local)"
        )
        return
    for index, provider in enumerate(providers.values()):
        if index:
            click.echo()
        origin = f"  [{provider.distribution}]" if provider.distribution else ""
        click.echo(f"{provider.name}  {provider.description}{origin}")
        for info in provider.options:
            default = "required" if info.required else f"default: {info.default}"
            click.echo(f"    {info.name} ({info.type}; {default}; env {info.env_var})")
            if info.description:
                click.echo(f"        {info.description}")


# ---------------------------------------------------------------------------------- main


def build_cli() -> click.Group:
    """The root group with the commands plugins add (see :class:`SkillRuntimeGroup`).

    Nothing of a plugin is imported until one of its commands runs, or help lists them all.
    """
    return SkillRuntimeGroup(
        name=cli.name,
        commands=dict(cli.commands),
        params=list(cli.params),
        callback=cli.callback,
        help=cli.help,
        context_settings=cli.context_settings,
        lazy_commands=BUILTIN_COMMANDS,
        plugins=True,
    )


def main(args: Sequence[str] | None = None) -> None:
    """Console-script entry point of ``skillruntime`` (exits the process)."""
    build_cli().main(args=list(args) if args is not None else None, prog_name="skillruntime")
