"""``skillruntime mcp serve``: a runtime's skill tools and skills as an MCP server.

Added to the ``skillruntime`` command by the mcp plugin. ``--runtime``, ``--option`` and
``--conversation`` are the options of ``skillruntime exec``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillruntime.core.cli.errors import CliError, CliUsageError
from skillruntime.core.cli.runtime import parse_assignments, runtime_options

from .defaults import (
    CONVERSATION_HEADER,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE,
    LOOPBACK_HOSTS,
)

if TYPE_CHECKING:  # the server modules import the MCP SDK: loaded only when a server starts
    from skillruntime.core.models import Skill

    from .conversations import ServeConfig

__all__ = ["load_config", "mcp_group"]


def _skills(root: Path, names: Sequence[str]) -> list[Skill]:
    from skillruntime.core.skills import discover_skills

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
    runtime_name: str,
    option_items: Sequence[str],
    skills_root: Path,
    skill_names: Sequence[str],
    *,
    publish_directory: Path | None = None,
    publish_base_url: str | None = None,
) -> ServeConfig:
    """The :class:`ServeConfig` the command line describes (skills are loaded and checked)."""
    from .conversations import ServeConfig

    if publish_base_url is not None and publish_directory is None:
        raise CliUsageError("--publish-base-url needs --publish-dir")
    options: dict[str, Any] = parse_assignments(option_items, what="'--option'")
    options.pop("conversation_id", None)
    skills = _skills(skills_root, skill_names)
    # No configs: preparing a skill runs its declared bootstrap (see
    # SkillPreparationRequest.config_for).
    return ServeConfig(
        runtime_name,
        options,
        tuple(skills),
        publish_directory=publish_directory,
        publish_base_url=publish_base_url,
    )


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
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (one client, one conversation) or streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="HTTP: port."
)
@click.option(
    "--token",
    envvar="SKILLRUNTIME_MCP_TOKEN",
    show_envvar=True,
    default=None,
    help="HTTP: bearer token every request must carry (prefer the environment variable).",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="HTTP: a host name clients reach the server by, besides --host (repeatable).",
)
@click.option(
    "--allow-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="HTTP: a browser Origin to accept besides the bound host's (repeatable).",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="HTTP: largest request body.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SESSIONS,
    show_default=True,
    help="HTTP: most MCP sessions at once (at the cap the least recently used idle one ends).",
)
@click.option(
    "--session-idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_SESSION_IDLE_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="HTTP: end an MCP session with no request in flight for this long.",
)
@click.option(
    "--shutdown-grace",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_SHUTDOWN_GRACE,
    show_default=True,
    metavar="SECONDS",
    help="HTTP: on SIGTERM/SIGINT, exit within this long (open streams are closed).",
)
@click.option(
    "--publish-dir",
    "publish_directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Serve the publish_file tool: published files are copied under this host directory.",
)
@click.option(
    "--publish-base-url",
    default=None,
    metavar="URL",
    help="URL under which --publish-dir is served (default: file:// URLs).",
)
def serve_command(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    skills_root: Path,
    skill_names: tuple[str, ...],
    transport: str,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    max_body_bytes: int,
    max_sessions: int,
    session_idle_timeout: float,
    shutdown_grace: float,
    publish_directory: Path | None,
    publish_base_url: str | None,
) -> None:
    """Serve skill tools and skills to MCP clients.

    Tools: skill, bash, read, write, edit, ls, glob, grep, in the runtime named by --runtime,
    and publish_file with --publish-dir.
    Resources: skill://NAME/SKILL.md for every skill, and the skill's files once it is loaded.
    stdio serves one conversation: --conversation (kept for a later server to resume), or a
    generated one, printed on stderr and discarded on exit. HTTP gives each MCP session its own
    generated conversation (discarded when the session ends), or the one named by the request
    header X-Skillruntime-Conversation (kept).

    \b
    Examples:
      skillruntime mcp serve --skills examples/skills
      skillruntime mcp serve --runtime opensandbox -o domain=127.0.0.1:8090 --skills ./skills
      SKILLRUNTIME_MCP_TOKEN=... skillruntime mcp serve --transport http --skills ./skills
    """
    from .conversations import generated_conversation_id
    from .http import serve_http
    from .lifecycle import run_until_signal
    from .stdio import serve_stdio

    config = load_config(
        runtime_name,
        runtime_option_items,
        skills_root,
        skill_names,
        publish_directory=publish_directory,
        publish_base_url=publish_base_url,
    )
    if transport == "http":
        if conversation_id is not None:
            raise CliUsageError(
                f"--conversation applies to stdio; HTTP clients name a conversation with the "
                f"{CONVERSATION_HEADER} header"
            )
        if host not in LOOPBACK_HOSTS and not token:
            click.echo(
                f"skillruntime mcp: warning: serving {host} without a token; anyone who can "
                "reach it runs commands in the runtime",
                err=True,
            )

        def ready(url: str) -> None:
            click.echo(f"skillruntime mcp: serving {url}", err=True)

        run_until_signal(
            lambda stop: serve_http(
                config,
                host=host,
                port=port,
                token=token,
                allowed_hosts=allowed_hosts,
                allowed_origins=allowed_origins,
                max_body_bytes=max_body_bytes,
                max_sessions=max_sessions,
                session_idle_timeout=session_idle_timeout,
                shutdown_grace=shutdown_grace,
                stop=stop,
                on_ready=ready,
            )
        )
        return
    generated = conversation_id is None
    chosen = conversation_id or generated_conversation_id()
    note = " (generated: discarded on exit; name one with --conversation to keep it)"
    click.echo(f"skillruntime mcp: conversation {chosen}{note if generated else ''}", err=True)
    run_until_signal(lambda stop: serve_stdio(config, chosen, stop, discard_on_close=generated))
