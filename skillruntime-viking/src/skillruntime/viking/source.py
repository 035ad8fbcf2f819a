"""OpenViking remote skills as skill sources for ``SkillTools`` (``skillruntime.core.tools``).

A :class:`VikingSkillSource` shows a remote skill in the ``skill`` tool's listing (name,
description, canonical ``viking://`` URI) and materializes it only when the model first invokes
it: :meth:`VikingSkillSource.load` takes a lease on the verified local copy from the store, loads
its ``SKILL.md`` strictly and hands the skill to the runtime, which prepares it like a local skill
(its ``allowed-tools`` and ``metadata.requires`` apply). The lease is held until
:meth:`VikingSkillSource.close`, so the store never evicts a directory a runtime may be using.

:func:`viking_skill_sources` builds sources from a list of URIs or by discovery through the
store's listing API.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from skillruntime.core.models import Skill
from skillruntime.core.runtime.closing import Closeable
from skillruntime.core.skills import load_skill
from skillruntime.core.tools.skill import SkillSource

from .uris import parse_skill_uri

if TYPE_CHECKING:
    from .store import VikingSkillStore

__all__ = [
    "ProgressCallback",
    "VikingSkillSource",
    "close_sources",
    "discover_skill_sources",
    "skill_name_from_uri",
    "viking_skill_sources",
]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
"""``progress(bytes_done, bytes_total)`` while a skill's files are downloaded."""


def skill_name_from_uri(uri: str) -> str:
    """The skill name of a ``viking://…/skills/<name>`` URI.

    Raises :class:`~skillruntime.viking.errors.VikingStoreError` (``SKILL_INVALID``) for anything
    that is not a skill URI.
    """
    return parse_skill_uri(uri).name


class VikingSkillSource(Closeable):
    """A ``SkillSource`` (protocol of ``skillruntime.core.tools``) over one OpenViking skill.

    ``uri`` is normalized (no trailing ``/`` or ``/SKILL.md``); an invalid URI raises
    ``VikingStoreError`` (``SKILL_INVALID``). ``name`` defaults to the URI's skill name; the
    skill's ``SKILL.md`` must declare that name.
    ``description`` is the one given; when none is given it is fetched from the store
    (:meth:`VikingSkillStore.resolve`) the first time it is read, and a placeholder is shown if
    that fails (the failure is logged; :meth:`load` reports errors to the model).

    :meth:`load` (called on the skill's first activation, and again after a failed one) leases the
    verified directory — downloading it on a cache miss, with ``progress`` called as bytes arrive —
    and parses ``SKILL.md`` strictly. The lease is kept until :meth:`close`; the source is also a
    context manager. Thread-safe.
    """

    def __init__(
        self,
        store: VikingSkillStore,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.store = store
        parsed = parse_skill_uri(uri)
        self.uri = parsed.root_uri
        self._name = name or parsed.name
        self._description = description or None
        self._progress = progress
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._skill: Skill | None = None
        self._directory: Path | None = None
        self._instructions: Path | None = None
        self._files: frozenset[str] = frozenset()
        self._signature: str | None = None

    @property
    def name(self) -> str:
        """The skill name the model invokes."""
        return self._name

    @property
    def description(self) -> str:
        """The given description, else the store's (resolved once), else a placeholder."""
        with self._lock:
            if self._description is None:
                self._description = self._resolve_description()
            return self._description

    def _resolve_description(self) -> str:
        try:
            description = self.store.resolve(self.uri).description
        except Exception as exc:
            logger.warning("resolving the description of %s failed: %s", self.uri, exc)
            description = ""
        description = " ".join(str(description or "").split())
        return description or f"Skill {self._name} (remote, from OpenViking)"

    @property
    def location(self) -> str:
        """The skill's canonical ``viking://`` URI."""
        return self.uri

    @property
    def origin(self) -> str:
        """``openviking_user`` for a user-scope skill, ``openviking_shared`` for the account's
        shared ``viking://agent/skills``."""
        return "openviking_shared" if self.uri.startswith("viking://agent/") else "openviking_user"

    @property
    def directory(self) -> Path | None:
        """The leased local directory once :meth:`load` succeeded, else ``None``."""
        with self._lock:
            return self._directory

    def load(self) -> Skill:
        """Lease the verified skill directory (once) and load its ``SKILL.md`` strictly.

        After :meth:`load_instructions` only the revision it read is leased (see
        :attr:`signature`): a newer one on the server raises ``SKILL_REVISION_CHANGED`` before
        anything is downloaded. Raises the store's errors (``VikingStoreError`` with a stable
        ``code``) or ``InvalidSkillError``/``ValueError`` when ``SKILL.md`` is invalid or names
        another skill; a failed load holds no lease.
        """
        with self._lock:
            if self._skill is not None:
                return self._skill
            stack = ExitStack()
            try:
                lease = self.store.lease(
                    self.uri, progress=self._progress, signature=self._signature
                )
                directory = Path(stack.enter_context(lease))
                skill = load_skill(directory, strict=True, unknown_keys="warn")
                if skill is None:  # strict loading raises instead; kept for the type checker
                    raise ValueError(f"{directory} holds no usable skill")
                if skill.name != self._name:
                    raise ValueError(
                        f"the skill at {self.uri} declares the name {skill.name!r}, "
                        f"expected {self._name!r}"
                    )
            except BaseException:
                stack.close()
                raise
            self._stack, self._skill, self._directory = stack, skill, directory
            logger.debug("leased %s at %s", self.uri, directory)
            return skill

    def load_instructions(self) -> Skill:
        """Remote-first activation: the skill with only its ``SKILL.md`` (read from a fresh,
        verified manifest — access and revision checked), nothing of the package downloaded.

        The returned skill's ``base_path`` is a private temporary directory holding just
        ``SKILL.md`` (deleted by :meth:`close`); :attr:`package_files` lists the manifest's
        files. The revision read is pinned (:attr:`signature`) until :meth:`end_turn` or
        :meth:`close`: :meth:`load` and :meth:`read_resource` serve it or raise
        ``SKILL_REVISION_CHANGED``, so the package never differs from the instructions the model
        read; calling this again reads the skill anew and pins what it finds (a lease of another
        revision is released). Raises like :meth:`load`.
        """
        manifest = self.store.resolve(self.uri)
        directory = Path(tempfile.mkdtemp(prefix="skillruntime-viking-md-")) / manifest.name
        try:
            directory.mkdir(mode=0o700)
            (directory / "SKILL.md").write_text(manifest.content, encoding="utf-8")
            skill = load_skill(directory, strict=True, unknown_keys="warn")
            if skill is None:  # strict loading raises instead
                raise ValueError(f"{self.uri} holds no usable skill")
            if skill.name != self._name:
                raise ValueError(
                    f"the skill at {self.uri} declares the name {skill.name!r}, "
                    f"expected {self._name!r}"
                )
        except BaseException:
            shutil.rmtree(directory.parent, ignore_errors=True)
            raise
        with self._lock:
            previous, self._instructions = self._instructions, directory
            self._files = frozenset({"SKILL.md", *(item.path for item in manifest.files)})
            stale: ExitStack | None = None
            if self._signature not in (None, manifest.signature):
                stale, self._stack = self._stack, None
                self._skill, self._directory = None, None
            self._signature = manifest.signature
        if previous is not None:
            shutil.rmtree(previous.parent, ignore_errors=True)
        if stale is not None:
            stale.close()
        return skill

    @property
    def signature(self) -> str | None:
        """The manifest signature :meth:`load_instructions` pinned (``None`` when unpinned)."""
        with self._lock:
            return self._signature

    @property
    def package_files(self) -> frozenset[str]:
        """The manifest's file paths, once :meth:`load_instructions` ran."""
        with self._lock:
            return self._files

    def read_resource(self, path: str) -> bytes:
        """One file of the skill read from the server and verified (no materialization); of
        the pinned revision only, else ``SKILL_REVISION_CHANGED``."""
        return self.store.read_file(self.uri, path, signature=self.signature)

    def end_turn(self) -> None:
        """The end of an agent turn (called by ``SkillTurn.close``): release the lease and the
        pin, so the next turn's :meth:`load` reads the integrity manifest again with the current
        identity —
        revoked access or a new revision is noticed — and reuses the host cache when the
        revision is unchanged."""
        self.close()

    def close(self) -> None:
        """Release the lease and the pin (idempotent); a later :meth:`load` takes a new one."""
        with self._lock:
            stack, self._stack = self._stack, None
            self._skill, self._directory = None, None
            instructions, self._instructions = self._instructions, None
            self._files = frozenset()
            self._signature = None
        if instructions is not None:
            shutil.rmtree(instructions.parent, ignore_errors=True)
        if stack is not None:
            stack.close()


def viking_skill_sources(
    store: VikingSkillStore,
    uris: Iterable[str] | None = None,
    *,
    discover: str | Sequence[str] | None = None,
    resolve: bool = True,
    progress: ProgressCallback | None = None,
) -> list[VikingSkillSource]:
    """Sources for ``SkillTools``: the skills at ``uris`` and/or those found by discovery.

    * ``uris``: each is a skill URI. With ``resolve`` (default) each is resolved now, which checks
      that the skill exists and fills in its name and description; without it the name comes from
      the URI and the description is fetched lazily, on first display.
    * ``discover``: a scope (or several) passed to :meth:`VikingSkillStore.list_skills`, e.g.
      ``"viking://user/alice/skills"`` or ``"viking://agent/skills"``; every listed skill becomes
      a source with the listed name and description. A skill already given in ``uris`` (same URI)
      or a later duplicate name is skipped, so user-scope skills listed first win over agent-scope
      ones of the same name.

    Nothing is downloaded: each skill is materialized on its first use. Close the sources (or
    :func:`close_sources`) when the tools are done.
    """
    sources: list[VikingSkillSource] = []
    names: set[str] = set()
    seen_uris: set[str] = set()

    def add(source: VikingSkillSource) -> None:
        if source.uri in seen_uris or source.name in names:
            logger.info("skipping duplicate remote skill %s (%s)", source.name, source.uri)
            return
        seen_uris.add(source.uri)
        names.add(source.name)
        sources.append(source)

    for uri in uris or ():
        if resolve:
            manifest = store.resolve(uri)
            add(
                VikingSkillSource(
                    store,
                    manifest.uri,
                    name=manifest.name,
                    description=manifest.description or None,
                    progress=progress,
                )
            )
        else:
            add(VikingSkillSource(store, uri, progress=progress))
    scopes = [discover] if isinstance(discover, str) else list(discover or ())
    for scope in scopes:
        for summary in store.list_skills(scope):
            add(
                VikingSkillSource(
                    store,
                    summary.uri,
                    name=summary.name,
                    description=summary.description or None,
                    progress=progress,
                )
            )
    return sources


def discover_skill_sources(
    store: VikingSkillStore,
    query: str,
    *,
    local: Iterable[SkillSource] = (),
    limit: int = 8,
    score_threshold: float = 0.35,
    timeout_seconds: float = 2.0,
    progress: ProgressCallback | None = None,
) -> list[SkillSource]:
    """The sources of one turn: the ``local`` ones, then the remote skills OpenViking finds
    for ``query`` (the user's message) — top ``limit`` scoring at least ``score_threshold``,
    answered within ``timeout_seconds`` (docs/viking.md).

    Precedence for one name: a local skill, then an OpenViking user skill, then an OpenViking
    shared skill (``viking://agent/skills``); a hidden duplicate is logged and dropped, not
    refused. Each remote source's ``location`` is its canonical URI and its ``origin`` says
    which scope it comes from. When the search fails or times out the turn goes on with the
    local skills only (logged with the error code, nothing else). Nothing is downloaded.
    """
    chosen: list[SkillSource] = list(local)
    names = {source.name for source in chosen}
    try:
        found = store.find_skills(
            query, limit=limit, score_threshold=score_threshold, timeout_seconds=timeout_seconds
        )
    except Exception as exc:
        code = getattr(exc, "code", type(exc).__name__)
        logger.warning("skill discovery failed (%s); using the local skills only", code)
        return chosen
    ranked = sorted(
        enumerate(found),
        key=lambda item: (item[1].uri.startswith("viking://agent/"), item[0]),
    )
    for _, summary in ranked:
        if summary.name in names:
            logger.info("skill %s (%s) is hidden by a preferred one", summary.name, summary.uri)
            continue
        names.add(summary.name)
        chosen.append(
            VikingSkillSource(
                store,
                summary.uri,
                name=summary.name,
                description=summary.description or None,
                progress=progress,
            )
        )
    return chosen


def close_sources(sources: Iterable[VikingSkillSource]) -> None:
    """Close every source (releasing its lease); errors are logged, the rest still close."""
    for source in sources:
        try:
            source.close()
        except Exception as exc:
            logger.warning("closing the source of %s failed: %s", source.uri, exc)
