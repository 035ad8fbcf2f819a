"""What the options models of the conversation-capable runtimes share.

:class:`SandboxRuntimeOptions` holds the validators of the runtimes that run skills in a sandbox
or container (``remote_root``, ``conversations_root``, ``conversation_id``, ``base_environment``,
``conversation_store``); the ``*_field`` functions give the conversation fields every such model
declares the same way. A backend still declares its fields itself, in its own order, so the
listing derived from its model (``skillruntime runtimes``) keeps that order.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from skillruntime.core.models import validate_environment
from skillruntime.core.plugins.options import RuntimeOptions
from skillruntime.core.runtime.workspace import (
    validate_conversation_id,
    validate_conversations_root,
)
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY

from .guard_rules import DEFAULT_ACTIVITY_INTERVAL_SECONDS
from .lease_rules import DEFAULT_LEASE_TTL_SECONDS, DEFAULT_LEASE_WAIT_SECONDS
from .sandboxes import DEFAULT_ORPHAN_GRACE_SECONDS

__all__ = [
    "SandboxRuntimeOptions",
    "activity_interval_field",
    "conversation_store_field",
    "exclusive_field",
    "lease_ttl_field",
    "lease_wait_field",
    "orphan_grace_field",
    "upload_policy_field",
]


def conversation_store_field() -> Any:
    """The ``conversation_store`` field: a store or a store URL, unset by default."""
    return Field(
        default=None,
        description="A ConversationStore or a URL (sqlite:///…, postgresql+psycopg://…).",
    )


def upload_policy_field(description: str = "Names skipped when skills are uploaded.") -> Any:
    """The ``upload_policy`` field, defaulting to :data:`DEFAULT_UPLOAD_POLICY`."""
    return Field(default=DEFAULT_UPLOAD_POLICY, description=description)


def exclusive_field() -> Any:
    """The ``exclusive`` field: hold the conversation's lease during every operation (off)."""
    return Field(
        default=False,
        description="Hold the conversation's lease in the store during every operation.",
    )


def lease_ttl_field() -> Any:
    """The ``lease_ttl_seconds`` field: over 0, at most a day."""
    return Field(
        default=DEFAULT_LEASE_TTL_SECONDS, gt=0, le=86400, description="Lease TTL (renewed)."
    )


def lease_wait_field() -> Any:
    """The ``lease_wait_seconds`` field: not negative."""
    return Field(
        default=DEFAULT_LEASE_WAIT_SECONDS, ge=0, description="How long to wait for the lease."
    )


def activity_interval_field() -> Any:
    """The ``activity_interval_seconds`` field: positive."""
    return Field(
        default=DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        gt=0,
        description="Most frequent refresh of the record's updated_at while in use.",
    )


def orphan_grace_field() -> Any:
    """The ``orphan_grace_seconds`` field: not negative (the default of
    :mod:`skillruntime.core.conversations.sandboxes`)."""
    return Field(
        default=DEFAULT_ORPHAN_GRACE_SECONDS,
        ge=0,
        description="Age after which an unrecorded sandbox of the conversation is an orphan.",
    )


class SandboxRuntimeOptions(RuntimeOptions):
    """Base of the options of a runtime with a remote workspace and optional conversations.

    The subclass declares ``base_environment: dict[str, str]``, ``remote_root: str``,
    ``conversations_root: str``, ``conversation_id: str | None`` and ``conversation_store``;
    this class validates them: the environment with
    :func:`~skillruntime.core.models.validate_environment`, both roots with
    :func:`~skillruntime.core.runtime.workspace.validate_conversations_root`, the conversation id
    with :func:`~skillruntime.core.runtime.workspace.validate_conversation_id`, and rejects a
    ``conversation_store`` without a ``conversation_id``.
    """

    @field_validator("base_environment", check_fields=False)
    @classmethod
    def _valid_environment(cls, value: dict[str, str]) -> dict[str, str]:
        return validate_environment(value)

    @field_validator("remote_root", "conversations_root", check_fields=False)
    @classmethod
    def _valid_root(cls, value: str) -> str:
        return validate_conversations_root(value)

    @field_validator("conversation_id", check_fields=False)
    @classmethod
    def _valid_conversation(cls, value: str | None) -> str | None:
        return None if value is None else validate_conversation_id(value)

    @model_validator(mode="after")
    def _store_needs_conversation(self) -> SandboxRuntimeOptions:
        store = getattr(self, "conversation_store", None)
        if store is not None and getattr(self, "conversation_id", None) is None:
            raise ValueError("conversation_store needs a conversation_id")
        return self
