"""Options of the ``docker`` runtime (``SKILLRUNTIME_DOCKER_*`` variables)."""

from __future__ import annotations

from pydantic import Field, field_validator
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

from .security import check_binds

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "DEFAULT_CPUS",
    "DEFAULT_IMAGE",
    "DEFAULT_MEMORY",
    "DEFAULT_PIDS_LIMIT",
    "DEFAULT_REMOTE_ROOT",
    "DockerRuntimeOptions",
]

DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_REMOTE_ROOT = "/workspace/skills"
DEFAULT_CONVERSATIONS_ROOT = "/workspace/conversations"
DEFAULT_PIDS_LIMIT = 256
DEFAULT_MEMORY = "1g"
DEFAULT_CPUS = 1.0


class DockerRuntimeOptions(SandboxRuntimeOptions):
    """Options of :class:`~skillruntime.docker.DockerSkillRuntime`.

    Each option can also be set as ``SKILLRUNTIME_DOCKER_<OPTION>`` (mappings and lists as
    JSON). ``docker_host`` falls back to the engine's own ``DOCKER_HOST`` (and
    ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``) when unset.
    """

    model_config = SettingsConfigDict(
        env_prefix="SKILLRUNTIME_DOCKER_",
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
    )

    docker_host: str | None = Field(
        default=None, description="Engine address, e.g. unix:///var/run/docker.sock (DOCKER_HOST)."
    )
    api_version: str = Field(default="auto", description="Engine API version ('auto': negotiate).")
    request_timeout_seconds: float = Field(
        default=60.0, gt=0, description="Timeout of one engine request (not of a command)."
    )
    image: str = Field(default=DEFAULT_IMAGE, min_length=1, description="Container image.")
    user: str | None = Field(
        default=None,
        description="Container user (name or uid[:gid]); unset: the image's, else a non-root one.",
    )
    network_mode: str = Field(default="none", description="Container network ('none': no network).")
    cap_add: tuple[str, ...] = Field(
        default=(), description="Capabilities added back (all dropped)."
    )
    pids_limit: int = Field(default=DEFAULT_PIDS_LIMIT, ge=1, description="Process limit.")
    memory: str = Field(default=DEFAULT_MEMORY, min_length=1, description="Memory limit, e.g. 1g.")
    cpus: float = Field(default=DEFAULT_CPUS, gt=0, description="CPU limit in cores.")
    read_only_root: bool = Field(
        default=False, description="Mount the image's file system read-only."
    )
    no_new_privileges: bool = Field(default=True, description="Set no-new-privileges.")
    binds: tuple[str, ...] = Field(
        default=(), description="Extra binds host:container[:mode] (never the Docker socket)."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Deployment labels set on (and required of) containers."
    )
    base_environment: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Lowest layer of the command environment."
    )
    remote_root: str = Field(
        default=DEFAULT_REMOTE_ROOT, description="Prepared skills without a conversation."
    )
    conversations_root: str = Field(
        default=DEFAULT_CONVERSATIONS_ROOT,
        description="Parent of conversation workspaces (the conversation volume's mount point).",
    )
    conversation_id: str | None = Field(
        default=None, description="Conversation whose container and volume to use."
    )
    conversation_store: ConversationStore | str | None = conversation_store_field()
    upload_policy: UploadPolicy = upload_policy_field()
    exclusive: bool = exclusive_field()
    lease_ttl_seconds: float = lease_ttl_field()
    lease_wait_seconds: float = lease_wait_field()
    activity_interval_seconds: float = activity_interval_field()
    orphan_grace_seconds: float = orphan_grace_field()
    pool_size: int = Field(
        default=0,
        ge=0,
        description="Warm containers kept per deployment and image for new conversations (0: off).",
    )
    pool_ttl_seconds: float = Field(
        default=3600.0,
        gt=60,
        le=86400,
        description="Age after which an unclaimed warm container is removed.",
    )

    @field_validator("binds")
    @classmethod
    def _safe_binds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_binds(value)
        return value
