"""Any skillruntime runtime as a LangChain deepagents sandbox backend.

:class:`SkillRuntimeBackend` implements deepagents' ``SandboxBackendProtocol`` (``execute``, the
file operations, upload and download; sync and async) over a
:class:`~skillruntime.core.runtime.spi.SkillRuntime` — local, OpenSandbox, AIO or a third-party one
— and :class:`RuntimeSkills` gives deepagents' skills middleware skills that are prepared in that
runtime on first use, so their scripts run inside a remote sandbox too.
:class:`SkillRuntimeSandboxProvider` is the sandbox provider the deepagents command line finds
through its ``deepagents_code.sandbox_providers`` entry points.
"""

from ._version import __version__
from .backend import SkillRuntimeBackend
from .provider import SkillRuntimeSandboxProvider
from .skills import RuntimeSkills, activation_text

__all__ = [
    "RuntimeSkills",
    "SkillRuntimeBackend",
    "SkillRuntimeSandboxProvider",
    "__version__",
    "activation_text",
]
