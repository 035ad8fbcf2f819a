"""``LocalRuntimeOptions``: the options of the ``local`` runtime (``SKILLRUNTIME_LOCAL_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from skillruntime.core.conversations.options import (
    activity_interval_field,
    exclusive_field,
    lease_ttl_field,
    lease_wait_field,
    upload_policy_field,
)
from skillruntime.core.plugins.options import RuntimeOptions
from skillruntime.core.runtime.workspace import validate_conversation_id
from skillruntime.core.skills.files import UploadPolicy

from .process import DEFAULT_DRAIN_SECONDS, DEFAULT_KILL_GRACE_SECONDS

__all__ = ["LocalRuntimeOptions"]


class LocalRuntimeOptions(RuntimeOptions):
    """Options of :class:`~skillruntime.local.LocalSkillRuntime`.

    Each option can also be set as ``SKILLRUNTIME_LOCAL_<OPTION>`` (mappings as JSON).
    """

    model_config = SettingsConfigDict(env_prefix="SKILLRUNTIME_LOCAL_", extra="forbid", frozen=True)

    conversation_id: str | None = Field(
        default=None, description="Conversation whose workspace scopes files and commands."
    )
    conversations_root: Path | None = Field(
        default=None,
        description="Parent of conversation workspaces (default ~/.skillruntime/conversations).",
    )
    work_root: Path | None = Field(
        default=None,
        description="Without a conversation: receives skill copies and is the default cwd.",
    )
    base_environment: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Lowest layer of the command environment."
    )
    inherit_environment: bool = Field(
        default=True, description="Start commands from this process's environment."
    )
    kill_grace_seconds: float = Field(
        default=DEFAULT_KILL_GRACE_SECONDS,
        ge=0,
        description="Seconds between SIGTERM and SIGKILL of a timed-out command.",
    )
    drain_seconds: float = Field(
        default=DEFAULT_DRAIN_SECONDS,
        ge=0,
        description="Seconds background processes may hold the output after the shell exited.",
    )
    shell: str | None = Field(default=None, description="Shell to run commands with (bash/sh).")
    upload_policy: UploadPolicy = upload_policy_field("Names skipped when skills are copied.")
    conversation_store: str | None = Field(
        default=None,
        description="Store URL recording the conversation (sqlite:///…, postgresql+psycopg://…).",
    )
    exclusive: bool = exclusive_field()
    lease_ttl_seconds: float = lease_ttl_field()
    lease_wait_seconds: float = lease_wait_field()
    activity_interval_seconds: float = activity_interval_field()

    @model_validator(mode="after")
    def _check_modes(self) -> LocalRuntimeOptions:
        if self.conversation_id is None:
            if self.conversations_root is not None:
                raise ValueError("conversations_root needs a conversation_id")
            return self
        validate_conversation_id(self.conversation_id)
        if self.work_root is not None:
            raise ValueError("work_root cannot be combined with conversation_id")
        return self
