"""Build an artifact store from a URL through the ``skillruntime_artifact_stores`` plugin hook.

``file:///srv/skills`` or a plain path gives the ZIP/directory store; ``s3://bucket/prefix``,
``gs://…``, ``az://…``, ``memory://…`` the object store; ``objectstore+<url>`` forces the object
store for any fsspec URL (``objectstore+file:///srv/packages`` keeps packages as ZIP objects on a
local or shared file system). The provider is looked up by the full scheme, then by the part
before ``+``.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import PluginNotFoundError
from .spi import ArtifactStoreError, SkillArtifactStore

__all__ = ["open_artifact_store", "url_scheme"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(url: str) -> str:
    """The scheme of ``url``; ``file`` for a plain path (including ``C:\\…`` paths)."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else "file"


def open_artifact_store(url: str, **options: Any) -> SkillArtifactStore:
    """The store for ``url`` built by the provider registered for its scheme.

    ``options`` go to the provider's factory (for the object store: ``cache_dir``, ``limits``,
    ``storage_options`` and any other keyword, which is passed to fsspec). Raises
    :class:`PluginNotFoundError` listing the installed schemes when none serves ``url``.
    """
    from ..plugins.registry import available_artifact_stores

    scheme = url_scheme(url)
    providers = available_artifact_stores()
    provider = providers.get(scheme) or providers.get(scheme.partition("+")[0])
    if provider is None:
        installed = ", ".join(providers) or "none"
        raise PluginNotFoundError(
            f"no artifact store serves the URL scheme {scheme!r} (installed schemes: "
            f"{installed}); install the distribution that provides it, or use "
            "objectstore+<url> for any fsspec file system"
        )
    store = provider.factory(url, **options)
    if not isinstance(store, SkillArtifactStore):
        raise ArtifactStoreError(
            f"the {scheme!r} artifact store provider returned {type(store).__name__}, "
            "not a SkillArtifactStore"
        )
    return store
