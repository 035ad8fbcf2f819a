"""The ``skillruntime`` command: list runtimes, check skills, run commands, move files.

Errors are printed as one ``Error: ...`` line on stderr with exit status 2 for usage mistakes
(bad options) and 1 for failures; ``--debug`` shows the traceback and debug logging instead.
Installed plugins may add commands through the ``skillruntime_cli`` hook.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any

import click

from ..artifacts.cli import artifacts_group
from ..plugins import (
    RuntimeProvider,
    available_runtimes,
    describe_options,
    plugin_problems,
    register_cli_commands,
)
from .errors import as_cli_error
from .runtime import exec_command, files_group
from .skills import skills_group

__all__ = ["SkillRuntimeGroup", "build_cli", "cli", "main"]

logger = logging.getLogger(__name__)


class SkillRuntimeGroup(click.Group):
    """The root group: turns library errors into short messages unless ``--debug`` is given."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            if ctx.params.get("debug"):
                raise
            raise as_cli_error(error) from None


def _configure_logging(debug: bool) -> None:
    root = logging.getLogger()
    if root.handlers:
        root.setLevel(logging.DEBUG if debug else root.level)
        return
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="skillruntime: %(levelname)s: %(name)s: %(message)s",
    )


@click.group(cls=SkillRuntimeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skillruntime-core", prog_name="skillruntime")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
def cli(debug: bool) -> None:
    """One execution boundary for Agent Skills.

    Run skill commands and manage files in any installed runtime backend (the host, an
    OpenSandbox container, an AIO sandbox, ...). Backends are separate distributions, e.g.
    `pip install skillruntime-local`; `skillruntime runtimes` lists the installed ones.
    """
    _configure_logging(debug)


# ------------------------------------------------------------------------------ runtimes


def _provider_json(provider: RuntimeProvider[Any]) -> dict[str, Any]:
    return {
        "name": provider.name,
        "description": provider.description,
        "distribution": provider.distribution,
        "options": [dataclasses.asdict(info) for info in describe_options(provider)],
    }


@cli.command("runtimes")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def runtimes_command(as_json: bool) -> None:
    """List installed runtime backends and their options.

    Each option can be given as `--option NAME=VALUE` (or to `create_runtime`) or through the
    environment variable shown.
    """
    providers = available_runtimes()
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
        for info in describe_options(provider):
            default = "required" if info.required else f"default: {info.default}"
            click.echo(f"    {info.name} ({info.type}; {default}; env {info.env_var})")
            if info.description:
                click.echo(f"        {info.description}")


cli.add_command(skills_group)
cli.add_command(exec_command)
cli.add_command(files_group)
cli.add_command(artifacts_group)


# ---------------------------------------------------------------------------------- main


def build_cli() -> click.Group:
    """The root group with the commands plugins add through ``skillruntime_cli``.

    A plugin command never replaces a built-in one: a clash is logged and the plugin's command
    is dropped.
    """
    scratch = click.Group("plugins")
    register_cli_commands(scratch)
    group = SkillRuntimeGroup(
        name=cli.name,
        commands=dict(cli.commands),
        params=list(cli.params),
        callback=cli.callback,
        help=cli.help,
        context_settings=cli.context_settings,
    )
    for name, command in scratch.commands.items():
        if name in group.commands:
            logger.warning("a plugin tried to replace the built-in command %r; ignored", name)
            continue
        group.add_command(command, name)
    return group


def main(args: Sequence[str] | None = None) -> None:
    """Console-script entry point of ``skillruntime`` (exits the process)."""
    build_cli().main(args=list(args) if args is not None else None, prog_name="skillruntime")
