"""``AioRuntimeOptions``: the options of the ``aio`` runtime (``SKILLRUNTIME_AIO_*``)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from skillruntime.core.conversations.guard_rules import DEFAULT_ACTIVITY_INTERVAL_SECONDS
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.plugins.options import RuntimeOptions
from skillruntime.core.runtime.workspace import (
    validate_conversation_id,
    validate_conversations_root,
)
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, UploadPolicy

from .defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, TEMP_ROOT_PATTERN

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "DEFAULT_REMOTE_ROOT",
    "AioRuntimeOptions",
    "validate_base_url",
]

DEFAULT_REMOTE_ROOT = "/home/gem/workspace/skills"
"""Where skills are prepared on the service when no conversation is given."""

DEFAULT_CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"
"""Parent of conversation workspaces on the service."""


def validate_base_url(value: str) -> str:
    """Return ``value`` without a trailing slash after checking it is an absolute http(s) URL."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "base_url must be an absolute http:// or https:// URL of the AIO Sandbox service, "
            "e.g. http://127.0.0.1:8080"
        )
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; use the token or api_key option")
    if parts.query or parts.fragment:
        raise ValueError("base_url must not have a query or fragment")
    return value.strip().rstrip("/")


class AioRuntimeOptions(RuntimeOptions):
    """Options of :class:`~skillruntime.aio.AioSandboxSkillRuntime`.

    Each option can also be set as ``SKILLRUNTIME_AIO_<OPTION>`` (mappings as JSON). The runtime
    connects to a service someone else runs; it never creates or stops it.
    """

    model_config = SettingsConfigDict(env_prefix="SKILLRUNTIME_AIO_", extra="forbid", frozen=True)

    base_url: str = Field(description="AIO Sandbox URL, e.g. http://127.0.0.1:8080.")
    token: SecretStr | None = Field(
        default=None, description="Bearer token (JWT) sent as 'Authorization: Bearer'."
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key sent as the X-AIO-API-Key header."
    )
    conversation_id: str | None = Field(
        default=None, description="Conversation whose workspace scopes files and commands."
    )
    conversations_root: str = Field(
        default=DEFAULT_CONVERSATIONS_ROOT, description="Parent of conversation workspaces."
    )
    remote_root: str = Field(
        default=DEFAULT_REMOTE_ROOT,
        description="Without a conversation: receives prepared skills; its parent is the cwd.",
    )
    base_environment: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Lowest layer of the command environment."
    )
    connect_timeout: float = Field(
        default=DEFAULT_CONNECT_TIMEOUT, gt=0, description="Seconds to connect to the service."
    )
    read_timeout: float = Field(
        default=DEFAULT_READ_TIMEOUT,
        gt=0,
        description="Seconds to wait for a reply (commands add their own timeout).",
    )
    retry_attempts: int = Field(
        default=3, ge=1, le=10, description="Attempts of idempotent calls on transient errors."
    )
    command_api: Literal["auto", "bash", "shell"] = Field(
        default="auto", description="Command API: detect, /v1/bash or /v1/shell."
    )
    temp_root: str = Field(
        default="/tmp", description="Service directory for staged uploads and command output."
    )
    conversation_store: str | None = Field(
        default=None,
        description="Store URL holding the conversation's lease (sqlite:///…, postgresql+psycopg://…).",
    )
    exclusive: bool = Field(
        default=False,
        description="Hold the conversation's lease in the store during every operation.",
    )
    lease_ttl_seconds: float = Field(
        default=DEFAULT_LEASE_TTL_SECONDS, gt=0, le=86400, description="Lease TTL (renewed)."
    )
    lease_wait_seconds: float = Field(
        default=DEFAULT_LEASE_WAIT_SECONDS, ge=0, description="How long to wait for the lease."
    )
    activity_interval_seconds: float = Field(
        default=DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        gt=0,
        description="Most frequent refresh of the record's updated_at while in use.",
    )
    upload_policy: UploadPolicy = Field(
        default=DEFAULT_UPLOAD_POLICY, description="Names skipped when skills are uploaded."
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return validate_base_url(value)

    @field_validator("remote_root", "temp_root")
    @classmethod
    def _check_absolute(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") == "":
            raise ValueError("must be an absolute path on the service other than /")
        return value.rstrip("/")

    @field_validator("temp_root")
    @classmethod
    def _check_plain(cls, value: str) -> str:
        if not TEMP_ROOT_PATTERN.fullmatch(value):
            raise ValueError("temp_root may contain only letters, digits, '.', '_', '-' and '/'")
        return value

    @model_validator(mode="after")
    def _check_conversation(self) -> AioRuntimeOptions:
        if self.conversation_id is not None:
            validate_conversation_id(self.conversation_id)
            validate_conversations_root(self.conversations_root)
        return self
