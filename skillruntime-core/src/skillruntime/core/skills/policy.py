"""The upload policy: which names of a skill directory never leave the host.

By default ``.git/`` and the files that hold secrets (``.env``, ``.env.*``, ``credentials.json``,
key files, tool credential stores) are skipped; :class:`UploadPolicy` replaces any rule.
"""

from __future__ import annotations

import fnmatch
import functools
import re

from pydantic import BaseModel, ConfigDict

__all__ = ["DEFAULT_UPLOAD_POLICY", "SECRET_FILE_NAMES", "SECRET_FILE_PATTERNS", "UploadPolicy"]


SECRET_FILE_NAMES: tuple[str, ...] = (
    ".env",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    "credentials",
    "credentials.json",
    "credentials.yaml",
    "credentials.yml",
    "credentials.toml",
    "credentials.ini",
)
"""File names the default policy never copies: dotenv files, tool credential stores (``netrc``,
npm, PyPI, PostgreSQL, git), and credential files in data formats (``credentials.json``, the
AWS-style ``credentials``). A document such as ``Credentials.md`` is kept."""

SECRET_FILE_PATTERNS: tuple[str, ...] = (
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
)
"""Shell-style patterns of key files the default policy never copies (PEM, PKCS#12, SSH keys)."""


class UploadPolicy(BaseModel):
    """Names excluded when a skill is copied or uploaded, compared case-insensitively.

    A directory is skipped (with everything in it) when its name is in ``excluded_directories``.
    A file is skipped when its name is in ``excluded_file_names``, starts with one of
    ``excluded_file_prefixes`` or matches one of the shell-style ``excluded_file_patterns``
    (``*``, ``?``, ``[...]``, matched against the name, not the path). The defaults skip ``.git/``
    and files that hold secrets (:data:`SECRET_FILE_NAMES`, ``.env.*``,
    :data:`SECRET_FILE_PATTERNS`); give any field to replace its default.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    excluded_directories: tuple[str, ...] = (".git",)
    excluded_file_names: tuple[str, ...] = SECRET_FILE_NAMES
    excluded_file_prefixes: tuple[str, ...] = (".env.",)
    excluded_file_patterns: tuple[str, ...] = SECRET_FILE_PATTERNS

    def allows_directory(self, name: str) -> bool:
        """True when a directory with this name is walked into."""
        return self.directory_rule(name) is None

    def allows_file(self, name: str) -> bool:
        """True when a regular file with this name is kept."""
        return self.file_rule(name) is None

    def directory_rule(self, name: str) -> str | None:
        """The rule that excludes a directory with this name (e.g. ``"directory '.git'"``)."""
        lowered = name.lower()
        for excluded in self.excluded_directories:
            if lowered == excluded.lower():
                return f"directory {excluded!r}"
        return None

    def file_rule(self, name: str) -> str | None:
        """The rule that excludes a file with this name (``"name '.env'"``, ``"pattern '*.pem'"``,
        ``"prefix '.env.'"``), or ``None`` when the file is kept."""
        lowered = name.lower()
        if not _file_matcher(
            self.excluded_file_names, self.excluded_file_prefixes, self.excluded_file_patterns
        ).match(lowered):
            return None
        for excluded in self.excluded_file_names:
            if lowered == excluded.lower():
                return f"name {excluded!r}"
        for prefix in self.excluded_file_prefixes:
            if lowered.startswith(prefix.lower()):
                return f"prefix {prefix!r}"
        for pattern in self.excluded_file_patterns:
            if fnmatch.fnmatchcase(lowered, pattern.lower()):
                return f"pattern {pattern!r}"
        return None  # unreachable: the matcher matches only names a rule above excludes


@functools.lru_cache(maxsize=64)
def _file_matcher(
    names: tuple[str, ...], prefixes: tuple[str, ...], patterns: tuple[str, ...]
) -> re.Pattern[str]:
    """One regular expression matching, in lower case, every file name the rules exclude."""
    parts = [re.escape(n.lower()) + r"\Z" for n in names]
    parts += [re.escape(p.lower()) for p in prefixes]
    parts += [fnmatch.translate(p.lower()) for p in patterns]
    return re.compile("|".join(f"(?:{part})" for part in parts) if parts else r"(?!)", re.DOTALL)


DEFAULT_UPLOAD_POLICY = UploadPolicy()
"""The default policy: skip ``.git/`` and files that hold secrets (see :class:`UploadPolicy`)."""
