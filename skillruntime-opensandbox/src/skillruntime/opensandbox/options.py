"""Options of the ``opensandbox`` runtime (``SKILLRUNTIME_OPENSANDBOX_*`` variables)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.options import (
    SandboxRuntimeOptions,
    activity_interval_field,
    conversation_store_field,
    exclusive_field,
    lease_ttl_field,
    lease_wait_field,
    orphan_grace_field,
    upload_policy_field,
)
from skillruntime.core.skills.files import UploadPolicy

from .command_plans import DEFAULT_DEADLINE_GRACE_SECONDS
from .retry import DEFAULT_RETRY_SECONDS

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "DEFAULT_IMAGE",
    "DEFAULT_REMOTE_ROOT",
    "EgressRule",
    "NetworkPolicyOptions",
    "OpenSandboxRuntimeOptions",
]

DEFAULT_IMAGE = "python:3.11"
DEFAULT_REMOTE_ROOT = "/workspace/skills"
DEFAULT_CONVERSATIONS_ROOT = "/workspace/conversations"


class EgressRule(BaseModel):
    """One egress rule: ``allow`` or ``deny`` a domain (``example.com``, ``*.example.com``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["allow", "deny"]
    target: str = Field(min_length=1)


class NetworkPolicyOptions(BaseModel):
    """The sandbox's egress policy: a default action and rules evaluated in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_action: Literal["allow", "deny"] = "deny"
    egress: tuple[EgressRule, ...] = ()


class OpenSandboxRuntimeOptions(SandboxRuntimeOptions):
    """Options of :class:`~skillruntime.opensandbox.OpenSandboxSkillRuntime`.

    Each option can also be set as ``SKILLRUNTIME_OPENSANDBOX_<OPTION>`` (mappings and lists as
    JSON). ``domain`` and ``api_key`` fall back to the SDK's own ``OPEN_SANDBOX_DOMAIN`` and
    ``OPEN_SANDBOX_API_KEY`` when unset.
    """

    model_config = SettingsConfigDict(
        env_prefix="SKILLRUNTIME_OPENSANDBOX_",
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
    )

    domain: str | None = Field(
        default=None, description="Server address, e.g. 'sandbox.example:8080' or a full URL."
    )
    api_key: SecretStr | None = Field(default=None, description="OPEN-SANDBOX-API-KEY value.")
    protocol: Literal["http", "https"] = Field(default="http", description="http or https.")
    request_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Timeout of one HTTP request (not of a command)."
    )
    use_server_proxy: bool = Field(
        default=False, description="Reach execd through the server's proxy route."
    )
    image: str = Field(default=DEFAULT_IMAGE, min_length=1, description="Sandbox image.")
    entrypoint: tuple[str, ...] | None = Field(
        default=None, description="Sandbox entrypoint (SDK default: tail -f /dev/null)."
    )
    sandbox_timeout_seconds: float = Field(
        default=600.0, ge=60, description="Sandbox lifetime; renewed on every resume."
    )
    ready_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Budget for a new or resumed sandbox to become ready."
    )
    resources: dict[str, str] = Field(
        default_factory=dict, description="Resource limits, e.g. {'cpu': '1', 'memory': '2Gi'}."
    )
    base_environment: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Lowest layer of the command environment."
    )
    network_policy: NetworkPolicyOptions | None = Field(
        default=None, description="Egress policy (default action and rules)."
    )
    metadata: dict[str, str] = Field(
        default_factory=dict, description="Extra sandbox metadata (values up to 63 chars)."
    )
    remote_root: str = Field(
        default=DEFAULT_REMOTE_ROOT, description="Prepared skills without a conversation."
    )
    conversations_root: str = Field(
        default=DEFAULT_CONVERSATIONS_ROOT, description="Parent of conversation workspaces."
    )
    conversation_id: str | None = Field(
        default=None, description="Conversation whose sandbox and workspace to use."
    )
    conversation_store: ConversationStore | str | None = conversation_store_field()
    uid: int | None = Field(default=None, ge=0, description="Run commands as this user id.")
    gid: int | None = Field(default=None, ge=0, description="Group id (needs uid).")
    upload_policy: UploadPolicy = upload_policy_field()
    exclusive: bool = exclusive_field()
    lease_ttl_seconds: float = lease_ttl_field()
    lease_wait_seconds: float = lease_wait_field()
    activity_interval_seconds: float = activity_interval_field()
    orphan_grace_seconds: float = orphan_grace_field()
    pool_size: int = Field(
        default=0,
        ge=0,
        description="Warm sandboxes kept per server and configuration for new conversations "
        "(0: off).",
    )
    pool_ttl_seconds: float = Field(
        default=3600.0,
        gt=60,
        le=86400,
        description="Life of an unclaimed warm sandbox on the server.",
    )
    retry_seconds: float = Field(
        default=DEFAULT_RETRY_SECONDS,
        ge=0,
        description="Time budget of the retries of one idempotent call (0: no retries).",
    )
    deadline_grace_seconds: float = Field(
        default=DEFAULT_DEADLINE_GRACE_SECONDS,
        gt=0,
        description="Seconds past a command's timeout before its outer deadline interrupts it.",
    )

    @model_validator(mode="after")
    def _check_combinations(self) -> OpenSandboxRuntimeOptions:
        if self.gid is not None and self.uid is None:
            raise ValueError("gid needs uid")
        return self
