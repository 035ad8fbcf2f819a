"""``VikingStoreOptions``: connection, limits and cache settings (``SKILLRUNTIME_VIKING_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "DEFAULT_CACHE_DIR",
    "SERVER_MAX_ENTRIES",
    "SERVER_MAX_FILE_BYTES",
    "SERVER_MAX_TOTAL_BYTES",
    "VikingStoreOptions",
]

MiB = 1024 * 1024

SERVER_MAX_ENTRIES = 512
"""OpenViking's integrity manifest limit: entries, directories and server summaries included."""
SERVER_MAX_FILE_BYTES = 16 * MiB
"""OpenViking's integrity limit for one file."""
SERVER_MAX_TOTAL_BYTES = 64 * MiB
"""OpenViking's integrity limit for all files of a skill."""

DEFAULT_CACHE_DIR = Path("~/.cache/skillruntime/viking")
"""Where the host cache lives when ``cache_dir`` is not set (``~`` is expanded at use)."""


class VikingStoreOptions(BaseSettings):
    """Options of :class:`~skillruntime.viking.VikingSkillStore`.

    Each option can also be set as ``SKILLRUNTIME_VIKING_<OPTION>``. Identity: with ``api_key``
    the server derives the account and user from the key (set ``account``/``user`` too when you
    know them, so cache entries survive key rotation); without a key (OpenViking ``dev`` mode) the
    ``account`` and ``user`` headers choose the identity. ``agent`` is sent as the actor peer.
    The effective package limits are the stricter of these values and the server's integrity
    limits (512 entries, 16 MiB per file, 64 MiB in total).
    """

    model_config = SettingsConfigDict(
        env_prefix="SKILLRUNTIME_VIKING_", extra="forbid", frozen=True
    )

    server_url: str = Field(
        default="http://127.0.0.1:1933", description="Base URL of the OpenViking server."
    )
    api_key: SecretStr | None = Field(
        default=None, repr=False, description="API key sent as X-API-Key (never logged)."
    )
    account: str | None = Field(default=None, description="Account (X-OpenViking-Account).")
    user: str | None = Field(default=None, description="User (X-OpenViking-User).")
    agent: str | None = Field(default=None, description="Actor peer (X-OpenViking-Actor-Peer).")
    cache_dir: Path | None = Field(
        default=None, description="Host cache directory (default ~/.cache/skillruntime/viking)."
    )
    max_files: int = Field(default=128, ge=1, description="Files per skill, SKILL.md included.")
    max_file_bytes: int = Field(default=8 * MiB, ge=1, description="Bytes per file.")
    max_total_bytes: int = Field(default=32 * MiB, ge=1, description="Bytes per skill.")
    cache_ttl_seconds: float = Field(
        default=600, gt=0, description="Idle time after which an unused cache entry expires."
    )
    cache_max_entries: int = Field(default=32, ge=1, description="Cached snapshots kept at most.")
    cache_max_bytes: int = Field(default=256 * MiB, ge=1, description="Cached bytes kept at most.")
    connect_timeout: float = Field(default=5, gt=0, description="Seconds to connect.")
    read_timeout: float = Field(default=30, gt=0, description="Seconds between received bytes.")
    busy_retries: int = Field(
        default=8, ge=0, description="Retries of a busy (409 path_busy) or unavailable server."
    )
    busy_backoff_seconds: float = Field(
        default=0.1, ge=0, description="First retry delay; doubles per retry up to 2 s."
    )
    lock_timeout_seconds: float = Field(
        default=300,
        gt=0,
        description="Wait for another download of the same revision before bypassing the cache.",
    )
    verify_revision: bool = Field(
        default=True, description="Recompute the server's revision from the file list."
    )
    download_concurrency: int = Field(
        default=4, ge=1, le=8, description="Files of one skill downloaded at the same time."
    )
    chunk_bytes: int = Field(default=1 * MiB, ge=4096, description="Streaming chunk size.")
    max_json_bytes: int = Field(
        default=16 * MiB,
        ge=1024,
        description="Bytes of one JSON answer (a manifest with SKILL.md content) at most.",
    )
    operation_timeout: float = Field(
        default=300,
        gt=0,
        description="Seconds one read, listing (retries included) or file download may take.",
    )
    min_download_bytes_per_second: int = Field(
        default=16 * 1024,
        ge=0,
        description="Slowest average download rate accepted once the grace period is over.",
    )
    download_rate_grace_seconds: float = Field(
        default=10,
        ge=0,
        description="Seconds a download may stay below the minimum rate (slow start).",
    )

    @field_validator("server_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("server_url must start with http:// or https://")
        return value

    @property
    def effective_max_files(self) -> int:
        """The file limit in force (the stricter of client and server)."""
        return min(self.max_files, SERVER_MAX_ENTRIES)

    @property
    def effective_max_file_bytes(self) -> int:
        """The per-file byte limit in force."""
        return min(self.max_file_bytes, SERVER_MAX_FILE_BYTES)

    @property
    def effective_max_total_bytes(self) -> int:
        """The per-skill byte limit in force."""
        return min(self.max_total_bytes, SERVER_MAX_TOTAL_BYTES)

    def resolved_cache_dir(self) -> Path:
        """``cache_dir`` with ``~`` expanded, or the default location."""
        return (self.cache_dir or DEFAULT_CACHE_DIR).expanduser()
