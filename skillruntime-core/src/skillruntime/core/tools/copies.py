"""Turn-level copies of prepared skills (``docs/agent-turn.md``, "Turn copies").

A turn executes a skill from its own copy under the workspace,
``<working dir>/.skill-turns/<turn digest>/<uri digest>/<skill name>``, made from the runtime's
prepared copy on the skill's first activation in the turn and deleted when the turn closes. A
script that writes into its skill folder therefore cannot change what the next turn runs; the
conversation's own files stay. Nothing is run at close when no copy was made.

The copy and the deletion run inside the runtime (``cp -R`` and ``rm -rf`` of quoted paths, with
a timeout), so they work on every backend.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import shlex
import threading

from ..models import SkillExecutionRequest
from ..runtime.spi import SkillRuntime

__all__ = ["COPY_TIMEOUT_SECONDS", "TURN_COPIES_DIRECTORY", "TurnCopies"]

logger = logging.getLogger(__name__)

TURN_COPIES_DIRECTORY = ".skill-turns"
"""The workspace directory holding the turns' copies."""

COPY_TIMEOUT_SECONDS = 120.0
"""Timeout of one copy or deletion command."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class TurnCopies:
    """The copies of one turn in ``runtime``'s workspace (thread-safe)."""

    def __init__(self, runtime: SkillRuntime, turn_id: str) -> None:
        self._runtime = runtime
        self.root = posixpath.join(
            runtime.default_working_directory, TURN_COPIES_DIRECTORY, _digest(turn_id)
        )
        self._lock = threading.Lock()
        self._copies: dict[str, str] = {}

    @property
    def paths(self) -> dict[str, str]:
        """Skill URI → runtime path of its copy in this turn."""
        with self._lock:
            return dict(self._copies)

    def copy(self, uri: str, name: str, prepared_base: str) -> str:
        """The turn's copy of the skill prepared at ``prepared_base`` (made once per URI).

        Raises ``RuntimeError`` when the copy command fails.
        """
        with self._lock:
            existing = self._copies.get(uri)
            if existing is not None:
                return existing
            target = posixpath.join(self.root, _digest(uri), posixpath.basename(name) or "skill")
            command = (
                f"rm -rf {shlex.quote(target)} && mkdir -p {shlex.quote(posixpath.dirname(target))}"
                f" && cp -R {shlex.quote(prepared_base)} {shlex.quote(target)}"
            )
            result = self._runtime.execute(
                SkillExecutionRequest(command=command, timeout_seconds=COPY_TIMEOUT_SECONDS)
            )
            if not result.ok:
                raise RuntimeError(
                    f"copying skill '{name}' for this turn failed (exit code {result.exit_code})"
                )
            self._copies[uri] = target
            return target

    def close(self) -> None:
        """Delete this turn's copies (nothing runs when none was made); failures are logged."""
        with self._lock:
            made, self._copies = bool(self._copies), {}
        if not made:
            return
        try:
            result = self._runtime.execute(
                SkillExecutionRequest(
                    command=f"rm -rf {shlex.quote(self.root)}", timeout_seconds=COPY_TIMEOUT_SECONDS
                )
            )
            if not result.ok:
                logger.warning("deleting the turn copies exited with code %d", result.exit_code)
        except Exception as exc:
            logger.warning("deleting the turn copies failed: %s", type(exc).__name__)
