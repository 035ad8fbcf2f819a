"""OpenSandbox runtime: skills in per-conversation OpenSandbox sandboxes, on the official SDK.

Install ``skillruntime-opensandbox`` and build it with
``create_runtime("opensandbox", domain=…, conversation_id=…)`` or directly as
:class:`OpenSandboxSkillRuntime`; its native asyncio twin is :class:`AsyncOpenSandboxSkillRuntime`
(``create_async_runtime("opensandbox", …)``). See ``docs/opensandbox-runtime.md``.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .async_runtime import AsyncOpenSandboxSkillRuntime
    from .errors import (
        OpenSandboxError,
        OpenSandboxExecutionError,
        OpenSandboxFileError,
        OpenSandboxFileNotFoundError,
        OpenSandboxIsADirectoryError,
        OpenSandboxNotADirectoryError,
        OpenSandboxPermissionError,
        SandboxReplacedError,
        SandboxUnavailableError,
    )
    from .options import EgressRule, NetworkPolicyOptions, OpenSandboxRuntimeOptions
    from .runtime import OpenSandboxSkillRuntime

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "OpenSandboxError": ".errors",
        "OpenSandboxExecutionError": ".errors",
        "OpenSandboxFileError": ".errors",
        "OpenSandboxFileNotFoundError": ".errors",
        "OpenSandboxIsADirectoryError": ".errors",
        "OpenSandboxNotADirectoryError": ".errors",
        "OpenSandboxPermissionError": ".errors",
        "SandboxReplacedError": ".errors",
        "SandboxUnavailableError": ".errors",
        "EgressRule": ".options",
        "NetworkPolicyOptions": ".options",
        "OpenSandboxRuntimeOptions": ".options",
        "OpenSandboxSkillRuntime": ".runtime",
        "AsyncOpenSandboxSkillRuntime": ".async_runtime",
    },
)

__all__ = [
    "AsyncOpenSandboxSkillRuntime",
    "EgressRule",
    "NetworkPolicyOptions",
    "OpenSandboxError",
    "OpenSandboxExecutionError",
    "OpenSandboxFileError",
    "OpenSandboxFileNotFoundError",
    "OpenSandboxIsADirectoryError",
    "OpenSandboxNotADirectoryError",
    "OpenSandboxPermissionError",
    "OpenSandboxRuntimeOptions",
    "OpenSandboxSkillRuntime",
    "SandboxReplacedError",
    "SandboxUnavailableError",
    "__version__",
]
