"""A scripted chat model for deepagents runs: it reads the conversation and answers with tool calls.

:class:`ScriptedSkillModel` plays an agent that uses one skill: it finds the skill's ``SKILL.md``
in the skills listing of the system prompt, reads it (which activates the skill), takes the
prepared directory from the answer and runs the skill's script there with ``execute``, then
reports the script's output. Nothing is hard-coded about where the skill ends up: every path
comes from what the agent was told.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable

PREPARED = re.compile(r"prepared in the runtime at `([^`]+)`")


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part["text"] if isinstance(part, dict) and "text" in part else str(part) for part in content
    )


class ScriptedSkillModel(BaseChatModel):
    """Activates ``skill`` and runs ``command(base_path)`` in the sandbox (see the module docs)."""

    skill: str
    command: Callable[[str], str]
    seen_tools: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted-skill-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, BaseMessage]:
        self.seen_tools[:] = [getattr(tool, "name", str(tool)) for tool in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        tool_results = [m for m in messages if isinstance(m, ToolMessage)]
        if not tool_results:
            system = "\n".join(_text(m) for m in messages if isinstance(m, SystemMessage))
            found = re.search(rf"(/\S*/{re.escape(self.skill)}/SKILL\.md)", system)
            if found is None:
                return AIMessage(content=f"The skill {self.skill} is not offered.")
            return _call("read_file", {"file_path": found.group(1)}, "1")
        last = tool_results[-1]
        if last.name == "read_file":
            prepared = PREPARED.search(_text(last))
            if prepared is None:
                return AIMessage(content=f"Activation failed: {_text(last)[:300]}")
            return _call("execute", {"command": self.command(prepared.group(1))}, "2")
        return AIMessage(content=f"Result:\n{_text(last)}")


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])
