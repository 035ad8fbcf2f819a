"""Errors of the MCP server distribution.

Only one: a ``skill://`` resource URI that is refused (malformed, or leaving its skill), a
:class:`ValueError` that the server answers as an MCP error. Everything else it raises is a
core error (:mod:`skillruntime.core.errors`). The tree::

    ValueError
    └── ResourceUriError
"""

from __future__ import annotations

__all__ = ["ResourceUriError"]


class ResourceUriError(ValueError):
    """A resource URI that is not a well-formed ``skill://`` URI inside one skill."""
