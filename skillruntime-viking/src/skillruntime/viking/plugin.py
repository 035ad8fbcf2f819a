"""Registers the ``viking`` artifact store and the ``viking`` CLI commands with skillruntime.

Store URLs: ``viking://`` (server from ``SKILLRUNTIME_VIKING_SERVER_URL`` or the default),
``viking://host:port`` (plain HTTP), ``viking+http://host:port`` or ``viking+https://host:port``.
Keyword options are :class:`~skillruntime.viking.VikingStoreOptions` fields.
"""

from __future__ import annotations

from typing import Any

import click

from skillruntime.core.plugins.registry import ArtifactStoreProvider, hookimpl

__all__ = ["create_artifact_store", "server_url_from_store_url", "skillruntime_artifact_stores"]

_DISTRIBUTION = "skillruntime-viking"


def server_url_from_store_url(url: str) -> str | None:
    """The HTTP(S) server URL a store URL names, or ``None`` for ``viking://`` alone."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a viking store URL: {url!r}")
    scheme = scheme.lower()
    rest = rest.strip("/")
    if scheme == "viking":
        return f"http://{rest}" if rest else None
    if scheme in ("viking+http", "viking+https"):
        if not rest:
            raise ValueError(f"{url!r} names no server")
        return f"{scheme.partition('+')[2]}://{rest}"
    raise ValueError(f"not a viking store URL: {url!r}")


def create_artifact_store(url: str, **options: Any) -> Any:
    """Factory of the ``viking`` provider: a read-only
    :class:`~skillruntime.viking.VikingArtifactStore`."""
    from .artifacts import VikingArtifactStore

    server_url = server_url_from_store_url(url)
    if server_url is not None:
        options.setdefault("server_url", server_url)
    return VikingArtifactStore(**options)


@hookimpl
def skillruntime_artifact_stores() -> list[ArtifactStoreProvider]:
    """The ``viking`` artifact store provider."""
    return [
        ArtifactStoreProvider(
            scheme="viking",
            description="OpenViking skills (read-only): verified revisions with a host cache",
            factory=create_artifact_store,
            distribution=_DISTRIBUTION,
        )
    ]


@hookimpl
def skillruntime_cli(group: click.Group) -> None:
    """Add the ``viking`` commands (defined in :mod:`skillruntime.viking.cli`)."""
    from . import cli

    cli.register(group)
