"""AIO Sandbox runtime: skills in a running AIO Sandbox service, over its HTTP API.

The service is someone else's: the runtime never creates or stops it. See
:class:`AioSandboxSkillRuntime` and ``docs/aio-runtime.md``.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .async_client import AsyncAioClient
    from .async_runtime import AsyncAioSkillRuntime
    from .client import AioClient
    from .errors import (
        AioAuthenticationError,
        AioNotFoundError,
        AioOperationError,
        AioProtocolError,
        AioRequestError,
        AioSandboxError,
        AioServerError,
        AioTransportError,
    )
    from .options import DEFAULT_CONVERSATIONS_ROOT, DEFAULT_REMOTE_ROOT, AioRuntimeOptions
    from .runtime import AioSandboxSkillRuntime

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "AsyncAioClient": ".async_client",
        "AsyncAioSkillRuntime": ".async_runtime",
        "AioClient": ".client",
        "AioAuthenticationError": ".errors",
        "AioNotFoundError": ".errors",
        "AioOperationError": ".errors",
        "AioProtocolError": ".errors",
        "AioRequestError": ".errors",
        "AioSandboxError": ".errors",
        "AioServerError": ".errors",
        "AioTransportError": ".errors",
        "DEFAULT_CONVERSATIONS_ROOT": ".options",
        "DEFAULT_REMOTE_ROOT": ".options",
        "AioRuntimeOptions": ".options",
        "AioSandboxSkillRuntime": ".runtime",
    },
)

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "DEFAULT_REMOTE_ROOT",
    "AioAuthenticationError",
    "AioClient",
    "AioNotFoundError",
    "AioOperationError",
    "AioProtocolError",
    "AioRequestError",
    "AioRuntimeOptions",
    "AioSandboxError",
    "AioSandboxSkillRuntime",
    "AioServerError",
    "AioTransportError",
    "AsyncAioClient",
    "AsyncAioSkillRuntime",
    "__version__",
]
