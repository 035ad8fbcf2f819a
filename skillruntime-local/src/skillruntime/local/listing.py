"""What ``skillruntime runtimes`` lists of the ``local`` runtime, without importing its options.

The plugin returns :data:`LOCAL_LISTING` from ``skillruntime_runtime_listings``; the tests check it
equals the listing derived from the options model
(:func:`skillruntime.core.plugins.registry.listing_drift`), so change both together.
"""

from __future__ import annotations

from skillruntime.core.plugins.listings import (
    UPLOAD_POLICY_DEFAULT,
    RuntimeListing,
    options,
)

__all__ = ["LOCAL_LISTING"]

LOCAL_LISTING = RuntimeListing(
    name="local",
    description="Runs skill commands on this host with bash (not a sandbox).",
    distribution="skillruntime-local",
    options=options(
        "SKILLRUNTIME_LOCAL_",
        [
            (
                "conversation_id",
                "str | None",
                None,
                "Conversation whose workspace scopes files and commands.",
            ),
            (
                "conversations_root",
                "Path | None",
                None,
                "Parent of conversation workspaces (default ~/.skillruntime/conversations).",
            ),
            (
                "work_root",
                "Path | None",
                None,
                "Without a conversation: receives skill copies and is the default cwd.",
            ),
            (
                "base_environment",
                "dict[str, str]",
                "{}",
                "Lowest layer of the command environment.",
            ),
            (
                "inherit_environment",
                "bool",
                "True",
                "Start commands from this process's environment.",
            ),
            (
                "kill_grace_seconds",
                "float",
                "2.0",
                "Seconds between SIGTERM and SIGKILL of a timed-out command.",
            ),
            (
                "drain_seconds",
                "float",
                "0.5",
                "Seconds background processes may hold the output after the shell exited.",
            ),
            ("shell", "str | None", None, "Shell to run commands with (bash/sh)."),
            (
                "upload_policy",
                "UploadPolicy",
                UPLOAD_POLICY_DEFAULT,
                "Names skipped when skills are copied.",
            ),
            (
                "conversation_store",
                "str | None",
                None,
                "Store URL recording the conversation (sqlite:///…, postgresql+psycopg://…).",
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
        ],
    ),
)
