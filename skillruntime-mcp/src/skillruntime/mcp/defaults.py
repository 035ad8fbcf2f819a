"""The MCP server's names and default limits, without importing the MCP SDK.

``skillruntime mcp serve --help`` and the option defaults of the command read these; the server
modules (:mod:`.http`, :mod:`.sessions`) use the same values.
"""

from __future__ import annotations

__all__ = [
    "CONVERSATION_HEADER",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "LOOPBACK_HOSTS",
]

CONVERSATION_HEADER = "X-Skillruntime-Conversation"
"""Request header naming the conversation a request belongs to."""
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body the HTTP transport accepts (larger ones are answered 413)."""
DEFAULT_MAX_SESSIONS = 100
"""Most HTTP sessions at once; at the cap the least recently used idle one is ended."""
DEFAULT_SESSION_IDLE_TIMEOUT = 1800.0
"""Seconds an HTTP session may stay idle before it ends (and its conversation with it)."""
DEFAULT_SHUTDOWN_GRACE = 10.0
"""Seconds a stopped server may take to close its conversations and connections."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Hosts that may be served without a token."""
