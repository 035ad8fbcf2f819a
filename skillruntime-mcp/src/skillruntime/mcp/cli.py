"""``skillruntime mcp serve``: a runtime's skill tools and skills as an MCP server.

Added to the ``skillruntime`` command by the mcp plugin. ``--runtime``, ``--option`` and
``--conversation`` are the options of ``skillruntime exec``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from skillruntime.core.cli_errors import CliError
from skillruntime.core.cli_runtime import (
    parse_assignments,
    runtime_options,
    skill_runtime_config,
)
from skillruntime.core.models import Skill
from skillruntime.core.skills import discover_skills

from .conversations import ServeConfig
from .lifecycle import run_until_signal
from .stdio import serve_stdio

__all__ = ["load_config", "mcp_group"]


def _skills(root: Path, names: Sequence[str]) -> list[Skill]:
    wanted = list(dict.fromkeys(names))
    skills = discover_skills(root, names=wanted or None, skip_invalid=True)
    if wanted:
        found = {skill.name: skill for skill in skills}
        missing = [name for name in wanted if name not in found]
        if missing:
            raise CliError(
                f"skill(s) under {root} are invalid: {', '.join(missing)} (see the warnings, or "
                f"run: skillruntime skills validate {root})"
            )
        skills = [found[name] for name in wanted]
    return skills


def load_config(
    runtime_name: str, option_items: Sequence[str], skills_root: Path, skill_names: Sequence[str]
) -> ServeConfig:
    """The :class:`ServeConfig` the command line describes (skills are loaded and checked)."""
    options: dict[str, Any] = parse_assignments(option_items, what="'--option'")
    options.pop("conversation_id", None)
    skills = _skills(skills_root, skill_names)
    try:
        configs = {skill.name: skill_runtime_config(skill) for skill in skills}
    except ValueError as error:
        raise CliError(str(error)) from None
    return ServeConfig(runtime_name, options, tuple(skills), configs)


@click.group("mcp")
def mcp_group() -> None:
    """Serve a runtime's skill tools and skills over the Model Context Protocol."""


@mcp_group.command("serve")
@runtime_options
@click.option(
    "--skills",
    "skills_root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="A skill directory, or a directory of skill directories.",
)
@click.option(
    "--skill",
    "skill_names",
    multiple=True,
    metavar="NAME",
    help="Serve only this skill (repeatable); default: every skill under --skills.",
)
def serve_command(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    skills_root: Path,
    skill_names: tuple[str, ...],
) -> None:
    """Serve skill tools over stdio to one MCP client.

    Tools: skill, bash, read, write, edit, ls, glob, grep, in the runtime named by --runtime.
    Resources: skill://NAME/SKILL.md for every skill, and the skill's files once it is loaded.
    stdio serves one conversation: --conversation, or a generated id printed on stderr.

    \b
    Examples:
      skillruntime mcp serve --skills examples/skills
      skillruntime mcp serve --runtime opensandbox -o domain=127.0.0.1:8090 --skills ./skills
    """
    config = load_config(runtime_name, runtime_option_items, skills_root, skill_names)
    if conversation_id is None:
        conversation_id = f"mcp-{uuid.uuid4().hex[:12]}"
    click.echo(f"skillruntime mcp: conversation {conversation_id}", err=True)
    run_until_signal(lambda stop: serve_stdio(config, conversation_id, stop))
