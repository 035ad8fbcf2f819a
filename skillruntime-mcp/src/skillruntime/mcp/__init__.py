"""skillruntime skill tools and skills as a Model Context Protocol server.

``skillruntime mcp serve`` (added to the ``skillruntime`` command) serves one runtime's
:class:`~skillruntime.core.tools.SkillTools` and ``skill://`` resources on the official MCP
Python SDK; :class:`SkillMcpServer` is the server object for embedding.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .conversations import ServeConfig, ServedConversation
    from .errors import ResourceUriError
    from .resources import SCHEME, parse_skill_uri, skill_uri
    from .server import SkillMcpServer
    from .stdio import serve_stdio

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "ServeConfig": ".conversations",
        "ServedConversation": ".conversations",
        "ResourceUriError": ".errors",
        "SCHEME": ".resources",
        "parse_skill_uri": ".resources",
        "skill_uri": ".resources",
        "SkillMcpServer": ".server",
        "serve_stdio": ".stdio",
    },
)

__all__ = [
    "SCHEME",
    "ResourceUriError",
    "ServeConfig",
    "ServedConversation",
    "SkillMcpServer",
    "__version__",
    "parse_skill_uri",
    "serve_stdio",
    "skill_uri",
]
