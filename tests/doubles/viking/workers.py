"""Functions run in child processes by the Viking concurrency tests (spawn start method)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def lease_and_hash(options: dict[str, Any], uri: str, barrier: Any) -> str:
    """Wait at ``barrier``, lease ``uri`` with a new store and return the SKILL.md text."""
    from skillruntime.viking import VikingSkillStore

    with VikingSkillStore(**options) as store:
        barrier.wait(timeout=60)
        with store.lease(uri) as path:
            return Path(path, "SKILL.md").read_text("utf-8")


def hold_lease(options: dict[str, Any], uri: str, ready: Any, release: Any) -> str:
    """Lease ``uri``, set ``ready``, keep the lease until ``release`` is set; return the path."""
    from skillruntime.viking import VikingSkillStore

    with VikingSkillStore(**options) as store, store.lease(uri) as path:
        ready.set()
        if not release.wait(timeout=60):
            raise TimeoutError("release was never set")
        return str(path)
