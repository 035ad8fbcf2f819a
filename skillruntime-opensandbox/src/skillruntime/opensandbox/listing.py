"""What ``skillruntime runtimes`` lists of the ``opensandbox`` runtime, without its options model.

The plugin returns :data:`OPENSANDBOX_LISTING` from ``skillruntime_runtime_listings``; the tests
check it equals the listing derived from the options model
(:func:`skillruntime.core.plugins.registry.listing_drift`), so change both together.
"""

from __future__ import annotations

from skillruntime.core.plugins.listings import (
    UPLOAD_POLICY_DEFAULT,
    RuntimeListing,
    options,
)

__all__ = ["OPENSANDBOX_LISTING"]

OPENSANDBOX_LISTING = RuntimeListing(
    name="opensandbox",
    description="Runs skills in an OpenSandbox sandbox, one per conversation.",
    distribution="skillruntime-opensandbox",
    options=options(
        "SKILLRUNTIME_OPENSANDBOX_",
        [
            (
                "domain",
                "str | None",
                None,
                "Server address, e.g. 'sandbox.example:8080' or a full URL.",
            ),
            ("api_key", "pydantic.types.SecretStr | None", None, "OPEN-SANDBOX-API-KEY value."),
            ("protocol", "Literal['http', 'https']", "http", "http or https."),
            (
                "request_timeout_seconds",
                "float",
                "30.0",
                "Timeout of one HTTP request (not of a command).",
            ),
            ("use_server_proxy", "bool", "False", "Reach execd through the server's proxy route."),
            ("image", "str", "python:3.11", "Sandbox image."),
            (
                "entrypoint",
                "tuple[str, ...] | None",
                None,
                "Sandbox entrypoint (SDK default: tail -f /dev/null).",
            ),
            (
                "sandbox_timeout_seconds",
                "float",
                "600.0",
                "Sandbox lifetime; renewed on every resume.",
            ),
            (
                "ready_timeout_seconds",
                "float",
                "30.0",
                "Budget for a new or resumed sandbox to become ready.",
            ),
            (
                "resources",
                "dict[str, str]",
                "{}",
                "Resource limits, e.g. {'cpu': '1', 'memory': '2Gi'}.",
            ),
            (
                "base_environment",
                "dict[str, str]",
                "{}",
                "Lowest layer of the command environment.",
            ),
            (
                "network_policy",
                "skillruntime.opensandbox.options.NetworkPolicyOptions | None",
                None,
                "Egress policy (default action and rules).",
            ),
            ("metadata", "dict[str, str]", "{}", "Extra sandbox metadata (values up to 63 chars)."),
            ("remote_root", "str", "/workspace/skills", "Prepared skills without a conversation."),
            (
                "conversations_root",
                "str",
                "/workspace/conversations",
                "Parent of conversation workspaces.",
            ),
            (
                "conversation_id",
                "str | None",
                None,
                "Conversation whose sandbox and workspace to use.",
            ),
            (
                "conversation_store",
                "skillruntime.core.conversations.spi.ConversationStore | str | None",
                None,
                "A ConversationStore or a URL (sqlite:///…, postgresql+psycopg://…).",
            ),
            ("uid", "int | None", None, "Run commands as this user id."),
            ("gid", "int | None", None, "Group id (needs uid)."),
            (
                "upload_policy",
                "UploadPolicy",
                UPLOAD_POLICY_DEFAULT,
                "Names skipped when skills are uploaded.",
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
                "orphan_grace_seconds",
                "float",
                "300.0",
                "Age after which an unrecorded sandbox of the conversation is an orphan.",
            ),
            (
                "pool_size",
                "int",
                "0",
                "Warm sandboxes kept per server and configuration for new conversations (0: off).",
            ),
            (
                "pool_ttl_seconds",
                "float",
                "3600.0",
                "Life of an unclaimed warm sandbox on the server.",
            ),
            (
                "retry_seconds",
                "float",
                "20.0",
                "Time budget of the retries of one idempotent call (0: no retries).",
            ),
            (
                "deadline_grace_seconds",
                "float",
                "10.0",
                "Seconds past a command's timeout before its outer deadline interrupts it.",
            ),
        ],
    ),
)
