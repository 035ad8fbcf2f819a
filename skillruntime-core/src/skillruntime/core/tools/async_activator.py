"""``AsyncSkillActivator`` and the async ``skill`` tool: prepare a configured skill on its first
activation, check its requirements inside the runtime, and hold the active skills' policies.

The one source of both faces: :mod:`skillruntime.core.tools.activator` (``SkillActivator``,
``skill_tool``) is generated from it by ``scripts/generate_sync.py``. The faces differ only in
their locks (an :class:`asyncio.Lock` per skill here, a :class:`threading.Lock` there) and in
that the async face loads a skill source in a worker thread (an artifact store may download it).
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """``SkillActivator`` and the ``skill`` tool: prepare a configured skill on its first
    activation, check its requirements inside the runtime, and hold the active skills' policies.

    Generated from :mod:`skillruntime.core.tools.async_activator`, the one source of both faces.
    """

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping

from ..models import Skill, SkillRuntimeConfig
from ..runtime.async_spi import AsyncSkillRuntime
from .arguments import SkillArguments
from .base import AsyncSkillTool
from .policy import SkillPolicy, missing_requirements, requirements_request
from .skill import (
    SkillSource,
    activation_text,
    failure_text,
    preparation_request,
    single_prepared,
)

__all__ = ["AsyncSkillActivator", "skill_tool"]

logger = logging.getLogger(__name__)


class _Slot:
    """One configured skill's preparation, policy and last failure, and the lock that lets one
    activation of it run at a time."""

    __slots__ = ("failure", "loaded", "lock", "policy", "prepared", "requirements_met")

    def __init__(self) -> None:
        if True:  # unasync: async
            self.lock = asyncio.Lock()
        else:  # unasync: sync
            self.lock = threading.Lock()
        self.loaded: Skill | None = None
        self.prepared: Skill | None = None
        self.policy: SkillPolicy | None = None
        self.requirements_met = False
        self.failure: BaseException | None = None


class AsyncSkillActivator:
    """Prepares and activates configured skills; holds the active skills' policies.

    Safe under concurrent calls (tasks of one event loop for the async face, threads for the
    sync one). One activation per skill runs at a time; a successful preparation is cached for
    the lifetime of this object, a failed one is not.
    """

    def __init__(
        self,
        runtime: AsyncSkillRuntime,
        sources: Mapping[str, SkillSource],
        configs: Mapping[str, SkillRuntimeConfig],
    ) -> None:
        self._runtime = runtime
        self._sources = dict(sources)
        self._configs = dict(configs)
        self._slots = {name: _Slot() for name in self._sources}
        self._lock = threading.Lock()
        self._active: dict[str, SkillPolicy] = {}

    @property
    def names(self) -> list[str]:
        """Configured skill names, in configured order."""
        return list(self._sources)

    def active_policies(self) -> list[SkillPolicy]:
        """Policies of the activated skills, in activation order."""
        with self._lock:
            return list(self._active.values())

    def active_names(self) -> list[str]:
        """Names of the activated skills, in activation order."""
        with self._lock:
            return list(self._active)

    def prepared(self, name: str) -> Skill | None:
        """The runtime copy of skill ``name`` once it has been prepared, else ``None``."""
        slot = self._slots.get(name)
        return slot.prepared if slot else None

    def loaded(self, name: str) -> Skill | None:
        """The skill as its source loaded it (host ``base_path``) once prepared, else ``None``."""
        slot = self._slots.get(name)
        return slot.loaded if slot else None

    def source(self, name: str) -> SkillSource | None:
        """The configured source of skill ``name``, or ``None``."""
        return self._sources.get(name)

    def failure(self, name: str) -> BaseException | None:
        """Why the last :meth:`activate` of skill ``name`` failed to load or prepare it (the
        source's or runtime's exception), ``None`` after a success or before any attempt."""
        slot = self._slots.get(name)
        return slot.failure if slot else None

    def activate_policy(self, name: str, policy: SkillPolicy) -> None:
        """Mark skill ``name`` active with ``policy`` before anything is prepared (remote-first
        activation); a later :meth:`activate` prepares it."""
        with self._lock:
            self._active.setdefault(name, policy)

    def deactivate(self, name: str) -> None:
        """Deactivate skill ``name`` (its prepared copy stays cached)."""
        with self._lock:
            self._active.pop(name, None)

    def reset(self) -> None:
        """Deactivate every skill (prepared copies stay cached; requirements are re-checked)."""
        with self._lock:
            self._active.clear()
        for slot in self._slots.values():
            if True:  # unasync: async
                slot.requirements_met = False  # no await between here and an activation's check
            else:  # unasync: sync
                with slot.lock:
                    slot.requirements_met = False

    async def activate(self, name: str) -> str:
        """Activate skill ``name``; the ``skill`` tool's result text or an ``Error: …`` string."""
        source = self._sources.get(name)
        if source is None:
            available = ", ".join(self._sources) or "none"
            return f"Error: Skill not found: {name}. Available skills: {available}"
        slot = self._slots[name]
        runtime_name = self._runtime.name
        async with slot.lock:
            if slot.prepared is None:
                try:
                    if True:  # unasync: async
                        skill = await asyncio.to_thread(source.load)
                    else:  # unasync: sync
                        skill = source.load()
                    if skill.name != name:
                        raise ValueError(f"the source loaded a skill named '{skill.name}'")
                    policy = SkillPolicy.from_skill(skill)
                except Exception as exc:
                    logger.warning("loading skill %s failed: %s", name, exc)
                    slot.failure = exc
                    return failure_text(f"loading skill '{name}'", exc)
                try:
                    slot.prepared = await self._prepare(skill)
                except Exception as exc:
                    logger.warning("preparing skill %s failed: %s", name, exc)
                    slot.failure = exc
                    return failure_text(
                        f"preparing skill '{name}' in the {runtime_name} runtime", exc
                    )
                slot.policy = policy
                slot.loaded = skill
                slot.failure = None
            assert slot.policy is not None
            if not slot.requirements_met:
                try:
                    missing = await self._missing(slot.policy)
                except Exception as exc:
                    return f"Error: checking the requirements of skill '{name}' failed: {exc}"
                if missing:
                    return (
                        f"Error: skill '{name}' cannot be used: missing in the {runtime_name} "
                        f"runtime: {', '.join(missing)}"
                    )
                slot.requirements_met = True
            with self._lock:
                self._active.setdefault(name, slot.policy)
            prepared = slot.prepared
        return activation_text(runtime_name, prepared)

    async def _prepare(self, skill: Skill) -> Skill:
        request = preparation_request(skill, self._configs.get(skill.name))
        return single_prepared(await self._runtime.prepare(request))

    async def _missing(self, policy: SkillPolicy) -> list[str]:
        """The requirements of ``policy`` missing in the runtime (no command when it has none)."""
        if not policy.requirements:
            return []
        result = await self._runtime.execute(requirements_request(policy.requirements))
        return missing_requirements(self._runtime.name, result)


def skill_tool(
    activator: AsyncSkillActivator | Callable[[], AsyncSkillActivator], description: str
) -> AsyncSkillTool:
    """Build the ``skill`` tool over ``activator`` (or over the activator a callable returns at
    each call, e.g. the one of the open turn)."""
    current = activator if callable(activator) else (lambda: activator)
    return AsyncSkillTool(
        "skill",
        description,
        SkillArguments,
        lambda arguments: current().activate(arguments.command.strip()),
        error_prefix="running the skill tool failed",
    )
