"""What ``skillruntime runtimes`` lists of the ``aio`` runtime, without importing its options.

The plugin returns :data:`AIO_LISTING` from ``skillruntime_runtime_listings``; the tests check it
equals the listing derived from the options model
(:func:`skillruntime.core.plugins.registry.listing_drift`), so change both together.
"""

from __future__ import annotations

from skillruntime.core.plugins.listings import (
    REQUIRED,
    UPLOAD_POLICY_DEFAULT,
    RuntimeListing,
    options,
)

__all__ = ["AIO_LISTING"]

AIO_LISTING = RuntimeListing(
    name="aio",
    description="Runs skills in an existing AIO Sandbox service over its HTTP API.",
    distribution="skillruntime-aio",
    options=options(
        "SKILLRUNTIME_AIO_",
        [
            ("base_url", "str", REQUIRED, "AIO Sandbox URL, e.g. http://127.0.0.1:8080."),
            (
                "token",
                "pydantic.types.SecretStr | None",
                None,
                "Bearer token (JWT) sent as 'Authorization: Bearer'.",
            ),
            (
                "api_key",
                "pydantic.types.SecretStr | None",
                None,
                "API key sent as the X-AIO-API-Key header.",
            ),
            (
                "conversation_id",
                "str | None",
                None,
                "Conversation whose workspace scopes files and commands.",
            ),
            (
                "conversations_root",
                "str",
                "/home/gem/workspace/conversations",
                "Parent of conversation workspaces.",
            ),
            (
                "remote_root",
                "str",
                "/home/gem/workspace/skills",
                "Without a conversation: receives prepared skills; its parent is the cwd.",
            ),
            (
                "base_environment",
                "dict[str, str]",
                "{}",
                "Lowest layer of the command environment.",
            ),
            ("connect_timeout", "float", "10.0", "Seconds to connect to the service."),
            (
                "read_timeout",
                "float",
                "60.0",
                "Seconds to wait for a reply (commands add their own timeout).",
            ),
            ("retry_attempts", "int", "3", "Attempts of idempotent calls on transient errors."),
            (
                "command_api",
                "Literal['auto', 'bash', 'shell']",
                "auto",
                "Command API: detect, /v1/bash or /v1/shell.",
            ),
            (
                "temp_root",
                "str",
                "/tmp",
                "Service directory for staged uploads and command output.",
            ),
            (
                "conversation_store",
                "str | None",
                None,
                "Store URL holding the conversation's lease (sqlite:///…, postgresql+psycopg://…).",
            ),
            (
                "exclusive",
                "bool",
                "False",
                "Hold the conversation's lease in the store during every operation.",
            ),
            ("lease_ttl_seconds", "float", "30.0", "Lease TTL (renewed)."),
            ("lease_wait_seconds", "float", "60.0", "How long to wait for the lease."),
            (
                "activity_interval_seconds",
                "float",
                "60.0",
                "Most frequent refresh of the record's updated_at while in use.",
            ),
            (
                "upload_policy",
                "UploadPolicy",
                UPLOAD_POLICY_DEFAULT,
                "Names skipped when skills are uploaded.",
            ),
        ],
    ),
)
