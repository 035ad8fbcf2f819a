"""Redaction of credentials from text a server sent, before it reaches an error or a log."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "Redactor"]

REDACTED = "<redacted>"
"""What a credential is replaced with."""

_LABELLED = re.compile(
    r"(?i)\b(x-api-key|api[_-]?key|authorization|access[_-]?token|token|secret|password)"
    r"(\"?\s*[:=]\s*\"?)(bearer\s+)?[^\s,;'\"}&]+"
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s,;'\"}&]+")
_JWT = re.compile(r"\beyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]{4,}")


class Redactor:
    """Replaces the configured secrets (verbatim), labelled credentials (``api_key=…``,
    ``Authorization: Bearer …``, ``token …``) and JSON web tokens with :data:`REDACTED`.

    Apply it to the whole text before cutting it to length, so no fragment of a secret is left.
    """

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        text = _LABELLED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        return _JWT.sub(REDACTED, text)
