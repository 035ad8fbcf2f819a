"""``SandboxKeeper``: the sandbox of one OpenSandbox runtime object, shared by both faces.

:class:`~.runtime.OpenSandboxSkillRuntime` and :class:`~.async_runtime.AsyncOpenSandboxSkillRuntime`
each hold one keeper; it is the whole of what they share (neither face touches the other's
members). A keeper owns

* the live handle, acquired through core's
  :class:`~skillruntime.core.conversations.sandboxes.ConversationSandboxes` over
  :class:`.driver.OpenSandboxDriver` (attach, create, replace, orphans: the rules are core's);
* the workspace (or ``remote_root``) made once per sandbox, recorded with the conversation;
* which prepared copies are complete: the conversation record's prepared skills, or for a private
  sandbox a set kept here;
* recovery: whether a failure means the sandbox vanished (then the handle is dropped and the next
  use re-attaches through the record, which replaces it);
* the end: :meth:`destroy` (record first, then the kill) and :meth:`close` (a private sandbox is
  killed; a conversation's runs on).

Its calls block (HTTP and store I/O): the async face runs them in a worker thread, once per
attach and once per prepared skill, not per command. They are thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from opensandbox.exceptions import (
    SandboxApiException,
    SandboxConnectionException,
    SandboxTimeoutException,
)
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.conversations import ConversationRecord
from skillruntime.core.conversations.binding import ConversationBinding
from skillruntime.core.conversations.sandboxes import (
    TAG_CONVERSATION_ID,
    TAG_CONVERSATION_KEY,
    TAG_RUNTIME,
    ConversationSandboxes,
    SandboxPool,
)
from skillruntime.core.errors import SkillPrepareError
from skillruntime.core.models import Skill
from skillruntime.core.runtime.workspace import ConversationWorkspace

from .driver import OpenSandboxDriver
from .errors import OpenSandboxError, SandboxReplacedError, SandboxReplacedWhilePreparingError
from .sandbox import ENDED_STATES, SandboxClient

__all__ = [
    "PREPARE_ATTEMPTS",
    "RUNTIME_NAME",
    "SandboxKeeper",
    "SandboxReplacedWhilePreparingError",
    "may_mean_sandbox_gone",
    "replaced_error",
    "replaced_too_often",
]

logger = logging.getLogger(__name__)

RUNTIME_NAME = "opensandbox"
PREPARE_ATTEMPTS = 3
"""Attempts at preparing one skill when its sandbox is replaced midway."""
_FILE_NOT_FOUND = "FILE_NOT_FOUND"


def may_mean_sandbox_gone(exc: BaseException) -> bool:
    """True for failures a vanished sandbox produces (not a missing file)."""
    if isinstance(exc, SandboxConnectionException | SandboxTimeoutException | httpx.TransportError):
        return True
    if isinstance(exc, SandboxApiException):
        code = exc.error.code if exc.error is not None else None
        if code == _FILE_NOT_FOUND:
            return False
        return exc.status_code in {404, 410, 502, 503}
    return False


def replaced_too_often(skill: Skill) -> SkillPrepareError:
    """The error of a preparation whose sandbox was replaced at every attempt."""
    return SkillPrepareError(
        f"Preparing skill '{skill.name}' failed: its sandbox was replaced "
        f"{PREPARE_ATTEMPTS} times while the skill was being uploaded or bootstrapped; "
        "nothing was recorded, prepare it again",
        skill_name=skill.name,
    )


def replaced_error(sandbox_id: str) -> SandboxReplacedError:
    """The error of a command whose sandbox vanished while it ran."""
    return SandboxReplacedError(
        f"The sandbox {sandbox_id} vanished while the command ran; the command died with it "
        "and was not retried. The next call uses a replacement sandbox, which holds none of "
        "the earlier files: prepare the skills again and re-run the command if it is safe",
        sandbox_id=sandbox_id,
    )


class SandboxKeeper:
    """One runtime object's sandbox; see the module docs.

    ``make_directories(directories, sandbox)`` creates directories in a sandbox (the sync file
    system's, retried like every file call). ``owns_store``: the store was opened from a URL by
    the runtime and is closed with it. ``audit_fields`` returns the fields of the runtime's
    audit events. ``pool``: the warm pool a new conversation's first sandbox is claimed from
    (:mod:`.pool`).
    """

    def __init__(
        self,
        client: SandboxClient,
        *,
        binding: ConversationBinding | None,
        workspace: ConversationWorkspace | None,
        remote_root: str,
        make_directories: Callable[[list[str], SandboxSync], None],
        orphan_grace_seconds: float,
        owns_store: bool = False,
        audit_fields: Callable[[], dict[str, Any]] = dict,
        pool: SandboxPool[SandboxSync] | None = None,
    ) -> None:
        self.client = client
        self.binding = binding
        self.workspace = workspace
        self.remote_root = remote_root
        self._make_directories = make_directories
        self._owns_store = owns_store
        tags = {**client.settings.metadata, TAG_RUNTIME: RUNTIME_NAME}
        if binding is not None:
            tags[TAG_CONVERSATION_ID] = binding.conversation_id
            tags[TAG_CONVERSATION_KEY] = binding.storage_key
        self.sandboxes = ConversationSandboxes(
            OpenSandboxDriver(client),
            binding=binding,
            tags=tags,
            orphan_grace_seconds=orphan_grace_seconds,
            error=OpenSandboxError,
            audit_fields=lambda: {
                key: value for key, value in audit_fields().items() if key != "sandbox_source"
            },
            pool=pool,
        )
        self._sandbox: SandboxSync | None = None
        self._last_sandbox_id: str | None = None
        self._lock = threading.RLock()
        self._ready_targets: set[str] = set()

    # ----------------------------------------------------------------- state

    @property
    def current(self) -> SandboxSync | None:
        """The live handle (``None`` before first use and after a vanish)."""
        with self._lock:
            return self._sandbox

    @property
    def sandbox_id(self) -> str | None:
        """Id of the live sandbox (``None`` before first use)."""
        with self._lock:
            return self._sandbox.id if self._sandbox is not None else None

    @property
    def record(self) -> ConversationRecord | None:
        """The conversation record as last read or written."""
        return self.sandboxes.record

    @property
    def skills_root(self) -> str:
        """Where prepared copies go: the workspace's skills directory, or ``remote_root``."""
        return self.workspace.skills_directory if self.workspace else self.remote_root

    # ---------------------------------------------------------------- attach

    def attach(self) -> SandboxSync:
        """The live sandbox, created or attached on first use, its workspace made."""
        with self._lock:
            if self._sandbox is None:
                sandbox = self.sandboxes.acquire().handle
                try:
                    self._ensure_workspace(sandbox)
                except BaseException:
                    self.client.release(sandbox)
                    raise
                if self._last_sandbox_id is not None and self._last_sandbox_id != sandbox.id:
                    self._ready_targets.clear()  # a new sandbox holds none of the copies
                self._last_sandbox_id = sandbox.id
                self._sandbox = sandbox
            return self._sandbox

    def _ensure_workspace(self, sandbox: SandboxSync) -> None:
        """Create the workspace (or remote root) once per sandbox: the first execd request on
        a freshly attached sandbox; idempotent, so transient failures are retried like every
        other file call."""
        if self.binding is None:
            directory = self.remote_root
        else:
            record = self.sandboxes.record
            if record is not None and record.sandbox_id == sandbox.id and record.workspace_ready:
                return
            assert self.workspace is not None
            directory = self.workspace.directory
        self._make_directories([directory], sandbox)
        if self.binding is not None:
            updated = self.binding.mark_workspace_ready(sandbox.id)
            if updated is not None:
                self.sandboxes.record = updated

    def drop(self, sandbox: SandboxSync) -> None:
        """Forget ``sandbox`` as the live one (if it is) and close its handle."""
        with self._lock:
            if self._sandbox is sandbox:
                self._sandbox = None
        self.client.release(sandbox)

    # -------------------------------------------------------------- recovery

    def recover(self, sandbox: SandboxSync, exc: BaseException) -> bool:
        """After a failure: if ``sandbox`` has vanished, drop the handle and return ``True``
        (the next use re-attaches through the record, which replaces the sandbox)."""
        return may_mean_sandbox_gone(exc) and self.vanished(sandbox)

    def vanished(self, sandbox: SandboxSync, *, patient: bool = False) -> bool:
        """Ask the server whether ``sandbox`` has ended; if so drop the handle.

        One attempt, no retries, for callers inside a retry budget of their own; ``patient``
        (after a command came back killed, where no budget is running) retries a server that is
        still coming back for ``retry_seconds``. ``False`` when the server cannot be asked.
        """
        try:
            state = self.client.state(sandbox.id, deadline=None if patient else time.monotonic())
        except OpenSandboxError:
            return False
        if state is not None and state.lower() not in ENDED_STATES:
            return False
        logger.warning("sandbox %s has vanished (state %s)", sandbox.id, state or "unknown")
        self.drop(sandbox)
        return True

    # ------------------------------------------------------------ prepared

    def is_ready(self, sandbox: SandboxSync, target: str) -> bool:
        """Whether the copy at ``target`` is complete in ``sandbox``."""
        if self.binding is None:
            with self._lock:
                return target in self._ready_targets
        record = self.sandboxes.record
        if (
            record is not None
            and record.sandbox_id == sandbox.id
            and target in record.prepared_skills.values()
        ):
            return True
        fresh = self.binding.load()
        if fresh is None or fresh.sandbox_id != sandbox.id:
            return False
        self.sandboxes.record = fresh
        return target in fresh.prepared_skills.values()

    def mark_ready(self, sandbox: SandboxSync, target: str, *, digest: str) -> None:
        """Record the copy as prepared in ``sandbox``, and only there.

        Raises :class:`SandboxReplacedWhilePreparingError` when that sandbox is no longer the
        live one (private mode) or no longer the one the record names (conversation mode): the
        files and bootstrap steps did not all reach the sandbox that would be recorded.
        """
        if self.binding is None:
            with self._lock:
                if self._sandbox is not sandbox:
                    raise SandboxReplacedWhilePreparingError(sandbox.id)
                self._ready_targets.add(target)
            return
        updated = self.binding.add_prepared(sandbox.id, digest, target)
        if updated is None or updated.sandbox_id != sandbox.id:
            # Another node replaced the sandbox: follow the record from the next call on.
            self.drop(sandbox)
            raise SandboxReplacedWhilePreparingError(sandbox.id)
        self.sandboxes.record = updated

    # ------------------------------------------------------------------ end

    def destroy(self, before_kill: Callable[[], object] = lambda: None) -> None:
        """End the conversation's sandbox: record deleted first, then the kill (after
        ``before_kill``: the runtime lets the streams still being read end)."""
        if self.binding is None:
            raise OpenSandboxError("destroy_conversation_sandbox() needs a conversation_id")
        with self._lock:
            local, self._sandbox = self._sandbox, None
        try:
            before_kill()
            self.sandboxes.destroy(local.id if local is not None else None)
        finally:
            self.client.release(local)

    def close(self, before_kill: Callable[[], object] = lambda: None) -> None:
        """Release the handle; a private sandbox is killed (after ``before_kill``), a
        conversation's runs on. Closes the client, and the store when the runtime opened it."""
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        try:
            before_kill()
            if sandbox is not None and self.binding is None:
                try:
                    self.client.kill(sandbox.id)
                except OpenSandboxError:
                    logger.warning("killing sandbox %s at close failed", sandbox.id, exc_info=True)
        finally:
            self.client.release(sandbox)
            self.client.close()
            if self._owns_store and self.binding is not None:
                self.binding.store.close()
