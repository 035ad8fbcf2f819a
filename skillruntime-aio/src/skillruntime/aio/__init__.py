"""AIO Sandbox runtime: skills in a running AIO Sandbox service, over its HTTP API.

The service is someone else's: the runtime never creates or stops it. See
:class:`AioSandboxSkillRuntime` and ``docs/aio-runtime.md``.
"""

from ._version import __version__
from .async_client import AsyncAioClient
from .async_runtime import AsyncAioSkillRuntime
from .client import AioClient
from .errors import (
    AioAuthenticationError,
    AioNotFoundError,
    AioOperationError,
    AioRequestError,
    AioSandboxError,
    AioServerError,
    AioTransportError,
)
from .options import DEFAULT_CONVERSATIONS_ROOT, DEFAULT_REMOTE_ROOT, AioRuntimeOptions
from .runtime import AioSandboxSkillRuntime

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "DEFAULT_REMOTE_ROOT",
    "AioAuthenticationError",
    "AioClient",
    "AioNotFoundError",
    "AioOperationError",
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
