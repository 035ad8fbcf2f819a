"""Helpers shared by the benchmark scripts of this folder (imported as ``bench_common``).

Each script is run directly (``.venv/bin/python tests/benchmarks/bench_X.py``), so this folder is
first on ``sys.path`` and the import needs no set-up.

The harness interface (``run_benchmarks.py``, ``make bench``, ``test_bench_quick.py``): every
module ``bench_*.py`` of this folder (except this one) defines ``run(quick: bool) -> list[Row]``.
``quick=True`` means a few iterations on small sizes (seconds in all; run by the test suite so a
broken benchmark fails the build, its figures are meaningless); ``quick=False`` is the real
measurement. A benchmark that cannot run here (an optional peer missing) leaves its row out.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True)
class Row:
    """One line of the benchmark table: a measurement against a baseline of the same run.

    ``value`` and ``baseline`` are in ``unit`` (seconds unless told); ``ratio`` is
    ``value / baseline``. ``target`` is the ratio the measurement should stay at or under
    (``None`` when the row is informative only). ``note`` says what the baseline is.
    """

    name: str
    value: float
    baseline: float
    unit: str = "s"
    target: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float:
        """``value / baseline`` (``inf`` for a zero baseline with a positive value)."""
        if self.baseline == 0:
            return 0.0 if self.value == 0 else math.inf
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the ratio is within ``target`` (``None`` without a target)."""
        return None if self.target is None else self.ratio <= self.target

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (``ratio`` and ``met`` included)."""
        return {**asdict(self), "ratio": self.ratio, "met": self.met}


def median_seconds(action: Callable[[], object], runs: int) -> float:
    """Median wall seconds of ``runs`` calls of ``action``."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
