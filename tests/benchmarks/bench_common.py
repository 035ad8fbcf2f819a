"""Helpers shared by the benchmark scripts of this folder (imported as ``bench_common``).

Each script is run directly (``.venv/bin/python tests/benchmarks/bench_X.py``), so this folder is
first on ``sys.path`` and the import needs no set-up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from skillruntime.core.models import Skill


def default_scratch() -> str | None:
    """``/dev/shm`` when writable (so disk write-back does not blur the figures), else ``None``."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def make_skill(
    skill_dir: Path, files: int, file_size: int, *, name: str = "bench", random: bool = False
) -> Skill:
    """Generate a skill in ``skill_dir``: ``SKILL.md`` plus ``files - 1`` files of ``file_size``
    bytes spread over 20 directories, every tenth one executable. ``random`` fills them with
    ``os.urandom`` bytes (incompressible), otherwise with one repeated byte per file."""
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(f"---\nname: {name}\ndescription: benchmark\n---\n")
    for index in range(files - 1):
        directory = skill_dir / f"d{index % 20:02d}"
        directory.mkdir(exist_ok=True)
        path = directory / f"f{index:04d}.dat"
        path.write_bytes(os.urandom(file_size) if random else bytes([index % 251]) * file_size)
        if index % 10 == 0:
            path.chmod(0o755)
    return Skill(name=name, description="benchmark", base_path=str(skill_dir))


def request_count(double: Any) -> int:
    """HTTP requests a protocol double has counted since its last ``reset_stats()``."""
    return int(sum(double.stats()["requests"].values()))
