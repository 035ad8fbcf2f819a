"""OpenSandbox runtime: skills in per-conversation OpenSandbox sandboxes, on the official SDK.

Install ``skillruntime-opensandbox`` and build it with
``create_runtime("opensandbox", domain=…, conversation_id=…)`` or directly as
:class:`OpenSandboxSkillRuntime`. See ``docs/opensandbox-runtime.md``.
"""

from .errors import (
    OpenSandboxError,
    OpenSandboxExecutionError,
    OpenSandboxFileError,
    OpenSandboxFileNotFoundError,
    OpenSandboxIsADirectoryError,
    OpenSandboxNotADirectoryError,
    OpenSandboxPermissionError,
    SandboxUnavailableError,
)
from .options import EgressRule, NetworkPolicyOptions, OpenSandboxRuntimeOptions
from .runtime import OpenSandboxSkillRuntime

__all__ = [
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
    "SandboxUnavailableError",
]
