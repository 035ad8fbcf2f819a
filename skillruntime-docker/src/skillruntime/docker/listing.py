"""What ``skillruntime runtimes`` lists of the ``docker`` runtime, without its options model.

The plugin returns :data:`DOCKER_LISTING` from ``skillruntime_runtime_listings``; the tests check
it equals the listing derived from the options model
(:func:`skillruntime.core.plugins.registry.listing_drift`), so change both together.
"""

from __future__ import annotations

from skillruntime.core.plugins.listings import (
    UPLOAD_POLICY_DEFAULT,
    RuntimeListing,
    options,
)

__all__ = ["DOCKER_LISTING"]

DOCKER_LISTING = RuntimeListing(
    name="docker",
    description="Runs skills in a Docker container, one per conversation.",
    distribution="skillruntime-docker",
    options=options(
        "SKILLRUNTIME_DOCKER_",
        [
            (
                "docker_host",
                "str | None",
                None,
                "Engine address, e.g. unix:///var/run/docker.sock (DOCKER_HOST).",
            ),
            ("api_version", "str", "auto", "Engine API version ('auto': negotiate)."),
            (
                "request_timeout_seconds",
                "float",
                "60.0",
                "Timeout of one engine request (not of a command).",
            ),
            ("image", "str", "python:3.12-slim", "Container image."),
            (
                "user",
                "str | None",
                None,
                "Container user (name or uid[:gid]); unset: the image's, else a non-root one.",
            ),
            ("network_mode", "str", "none", "Container network ('none': no network)."),
            ("cap_add", "tuple[str, ...]", "()", "Capabilities added back (all dropped)."),
            ("pids_limit", "int", "256", "Process limit."),
            ("memory", "str", "1g", "Memory limit, e.g. 1g."),
            ("cpus", "float", "1.0", "CPU limit in cores."),
            ("read_only_root", "bool", "False", "Mount the image's file system read-only."),
            ("no_new_privileges", "bool", "True", "Set no-new-privileges."),
            (
                "binds",
                "tuple[str, ...]",
                "()",
                "Extra binds host:container[:mode] (never the Docker socket).",
            ),
            (
                "labels",
                "dict[str, str]",
                "{}",
                "Deployment labels set on (and required of) containers.",
            ),
            (
                "base_environment",
                "dict[str, str]",
                "{}",
                "Lowest layer of the command environment.",
            ),
            ("remote_root", "str", "/workspace/skills", "Prepared skills without a conversation."),
            (
                "conversations_root",
                "str",
                "/workspace/conversations",
                "Parent of conversation workspaces (the conversation volume's mount point).",
            ),
            (
                "conversation_id",
                "str | None",
                None,
                "Conversation whose container and volume to use.",
            ),
            (
                "conversation_store",
                "skillruntime.core.conversations.spi.ConversationStore | str | None",
                None,
                "A ConversationStore or a URL (sqlite:///…, postgresql+psycopg://…).",
            ),
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
                "Warm containers kept per deployment and image for new conversations (0: off).",
            ),
            (
                "pool_ttl_seconds",
                "float",
                "3600.0",
                "Age after which an unclaimed warm container is removed.",
            ),
        ],
    ),
)
