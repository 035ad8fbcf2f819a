"""The three backends of the suite as (client, host path of a conversation workspace, cleanup)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillruntime.openai_agents import SkillRuntimeSandboxClient

from doubles.aio import AioDouble
from doubles.opensandbox.harness import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime


@dataclass
class Backend:
    """A runtime name with its options, and where a conversation's files land on the host."""

    name: str
    options: dict[str, Any]
    host_workspace: Callable[[str], Path]
    cleanup: Callable[[str], None]

    def client(self) -> SkillRuntimeSandboxClient:
        return SkillRuntimeSandboxClient.for_runtime(self.name, **self.options)


def local_backend(tmp_path: Path) -> Backend:
    root = tmp_path / "conversations"
    root.mkdir()
    return Backend(
        "local", {"conversations_root": str(root)}, lambda cid: root / cid, lambda cid: None
    )


def opensandbox_backend(double: OpenSandboxDouble, tmp_path: Path) -> Backend:
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    options = {"domain": double.domain, "api_key": double.api_key, "conversation_store": store}

    def host(cid: str) -> Path:
        with OpenSandboxSkillRuntime(conversation_id=cid, **options) as runtime:
            runtime.execute(SkillExecutionRequest(command="true"))  # attach to its sandbox
            sandbox_id = runtime.sandbox_id
        assert sandbox_id is not None
        return double.workspace_of(sandbox_id) / "conversations" / cid

    def cleanup(cid: str) -> None:
        with OpenSandboxSkillRuntime(conversation_id=cid, **options) as runtime:
            runtime.destroy_conversation_sandbox()

    return Backend("opensandbox", options, host, cleanup)


def aio_backend(double: AioDouble) -> Backend:
    options = {"base_url": double.url, "token": double.token}
    return Backend(
        "aio",
        options,
        lambda cid: double.host_path(f"/home/gem/workspace/conversations/{cid}"),
        lambda cid: None,
    )
