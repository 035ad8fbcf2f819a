"""What ``skillruntime runtimes`` shows of a runtime, held without pydantic.

A :class:`RuntimeListing` is a runtime's name, description, distribution and options
(:class:`RuntimeOptionInfo`), exactly as
:func:`~skillruntime.core.plugins.registry.describe_runtime` derives them from the provider's
options model. A plugin may declare its listings statically (hook ``skillruntime_runtime_listings``)
so that listing the installed runtimes imports neither pydantic-settings nor the options models; the
plugin's tests compare that declaration with the derived one
(:func:`~skillruntime.core.plugins.registry.listing_drift`) so the two cannot drift apart.

This module imports nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["REQUIRED", "UPLOAD_POLICY_DEFAULT", "RuntimeListing", "RuntimeOptionInfo", "options"]


@dataclass(frozen=True)
class RuntimeOptionInfo:
    """One option of a runtime, as shown by ``skillruntime runtimes``."""

    name: str
    type: str
    required: bool
    default: str | None
    env_var: str
    description: str


@dataclass(frozen=True)
class RuntimeListing:
    """One runtime as ``skillruntime runtimes`` lists it (no factory, no options model)."""

    name: str
    description: str
    distribution: str
    options: tuple[RuntimeOptionInfo, ...]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()
"""Marks an option without a default in :func:`options`."""

UPLOAD_POLICY_DEFAULT = (
    "excluded_directories=('.git',) excluded_file_names=('.env', '.netrc', '_netrc', '.npmrc', "
    "'.pypirc', '.pgpass', '.git-credentials', '.htpasswd', 'credentials', 'credentials.json', "
    "'credentials.yaml', 'credentials.yml', 'credentials.toml', 'credentials.ini') "
    "excluded_file_prefixes=('.env.',) excluded_file_patterns=('*.pem', '*.key', '*.p12', "
    "'*.pfx', 'id_rsa*', 'id_dsa*', 'id_ecdsa*', 'id_ed25519*')"
)
"""How the default :class:`~skillruntime.core.models.UploadPolicy` is shown (its ``str``);
tests/core/test_runtime_listings.py checks it against the model."""


def options(
    env_prefix: str, rows: Iterable[tuple[str, str, object, str]]
) -> tuple[RuntimeOptionInfo, ...]:
    """Option infos from ``(name, type, default, description)`` rows.

    ``default`` is the text shown (``None`` for a ``None`` default) or :data:`REQUIRED`; the
    environment variable is ``env_prefix`` plus the name, upper case.
    """
    infos = []
    for name, type_name, default, description in rows:
        required = default is REQUIRED
        infos.append(
            RuntimeOptionInfo(
                name=name,
                type=type_name,
                required=required,
                default=None if required or default is None else str(default),
                env_var=(env_prefix + name).upper(),
                description=description,
            )
        )
    return tuple(infos)
