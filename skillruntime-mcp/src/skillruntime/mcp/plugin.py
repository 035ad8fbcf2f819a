"""Registers the ``skillruntime mcp`` commands with the ``skillruntime`` CLI."""

from __future__ import annotations

import click

from skillruntime.core.plugins.registry import hookimpl

__all__ = ["skillruntime_cli"]


@hookimpl
def skillruntime_cli(group: click.Group) -> None:
    """Add the ``mcp`` group (defined in :mod:`skillruntime.mcp.cli`)."""
    from .cli import mcp_group

    group.add_command(mcp_group)
