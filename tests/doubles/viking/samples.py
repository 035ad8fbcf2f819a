"""Sample skills and helpers shared by the Viking store tests and benchmark."""

from __future__ import annotations

from pathlib import Path

SKILL_MD = b"---\nname: demo\ndescription: A demo skill\n---\n\n# Demo\n\nRun scripts/run.sh\n"
DEMO_ROOT = "viking://user/default/skills/demo"


def demo_files() -> dict[str, bytes]:
    """A small skill: SKILL.md, a script, a nested reference and a binary asset."""
    return {
        "SKILL.md": SKILL_MD,
        "scripts/run.sh": b"#!/bin/sh\necho demo\n",
        "references/guide.md": b"# Guide\n" * 50,
        "assets/blob.bin": bytes(range(256)) * 40,
    }


class Clock:
    """A settable clock for TTL and LRU tests."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def tree(path: Path) -> dict[str, bytes]:
    """Every regular file under ``path`` by relative POSIX path."""
    return {
        item.relative_to(path).as_posix(): item.read_bytes()
        for item in sorted(path.rglob("*"))
        if item.is_file()
    }


def leftovers(cache: Path) -> list[str]:
    """Staging and trash directories left in a cache."""
    root = cache / "v1"
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".partial-", ".trash-")))
