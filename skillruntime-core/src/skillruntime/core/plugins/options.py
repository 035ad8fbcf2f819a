"""``RuntimeOptions``: the pydantic-settings base class of every runtime's options model.

Kept apart from :mod:`skillruntime.core.plugins.registry` so that loading the plugins (and listing
the runtimes) does not import pydantic-settings;
``skillruntime.core.plugins.registry.RuntimeOptions`` is this class too.
"""

from __future__ import annotations

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
    """

    model_config = SettingsConfigDict(extra="forbid", frozen=True)
