"""``RuntimeOptions``: the pydantic-settings base class of every runtime's options model.

Kept apart from :mod:`skillruntime.core.plugins.registry` so that loading the plugins (and listing
the runtimes) does not import pydantic-settings;
``skillruntime.core.plugins.registry.RuntimeOptions`` is this class too.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["RuntimeOptions"]


class RuntimeOptions(BaseSettings):
    """Base class of a runtime's options model.

    A backend subclasses it, declares its options as fields (secrets as ``SecretStr``) and sets
    ``model_config = SettingsConfigDict(env_prefix="SKILLRUNTIME_<NAME>_", extra="forbid",
    frozen=True)``. When the subclass sets no ``env_prefix``,
    :func:`~skillruntime.core.plugins.registry.create_runtime` applies
    :func:`~skillruntime.core.plugins.registry.env_prefix_for` of the runtime name, so environment
    variables are always namespaced.

    The model is the one place an option is declared, validated and documented: its fields are
    the runtime's keyword arguments (:meth:`runtime_arguments`; a runtime may take further
    arguments that are objects, not options, such as a client), the CLI's ``-o`` and the
    ``SKILLRUNTIME_<NAME>_*`` variables; each runtime's tests check its ``__init__`` against the
    fields (names and defaults).
    """

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    def runtime_arguments(self) -> dict[str, Any]:
        """Keyword arguments for the runtime: every field by name, secrets revealed, lists and
        mappings copied (tuples as lists)."""
        arguments: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, tuple | list):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            arguments[name] = value
        return arguments
