"""skillruntime as a backend of the OpenAI Agents SDK.

:class:`SkillRuntimeSandboxClient` runs ``SandboxAgent`` sessions in any skillruntime runtime,
one conversation per session (resumable on another node); :func:`skills_capability` stages skills
through the runtime's ``prepare`` for the SDK's ``Skills`` capability; :func:`function_tools`
gives the :class:`~skillruntime.core.tools.SkillTools` set as plain ``FunctionTool``s whose
schema follows the active skills' ``allowed-tools``, and :func:`function_tools_run_config` the run
config under which a call to a hidden tool is an error result instead of the end of the run.

The SDK's sandbox interfaces are beta: this release is tested against ``openai-agents`` 0.24.x.
"""

from ._version import __version__
from .sandbox import (
    BACKEND_ID,
    DEFAULT_EXEC_TIMEOUT_SECONDS,
    SPOOL_BYTES,
    RuntimeFactory,
    SkillRuntimeSandboxClient,
    SkillRuntimeSandboxClientOptions,
    SkillRuntimeSandboxSession,
    SkillRuntimeSandboxSessionState,
)
from .skills import PreparedSkills, PreparedSkillSource, load_skills, skills_capability
from .tools import function_tools, function_tools_run_config, hidden_tool_message

__all__ = [
    "BACKEND_ID",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "SPOOL_BYTES",
    "PreparedSkillSource",
    "PreparedSkills",
    "RuntimeFactory",
    "SkillRuntimeSandboxClient",
    "SkillRuntimeSandboxClientOptions",
    "SkillRuntimeSandboxSession",
    "SkillRuntimeSandboxSessionState",
    "__version__",
    "function_tools",
    "function_tools_run_config",
    "hidden_tool_message",
    "load_skills",
    "skills_capability",
]
