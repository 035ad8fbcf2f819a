"""scripts/lowest_plan.py: the lowest-versions environment is planned from what is declared."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _plan() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lowest_plan", ROOT / "scripts/lowest_plan.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_distribution_is_installed_with_all_of_its_extras() -> None:
    lines = _plan().requirements()
    folders = sorted(p.parent.name for p in ROOT.glob("skillruntime-*/pyproject.toml"))
    assert [line.split("/", 1)[1].split("[", 1)[0] for line in lines] == folders
    core = next(line for line in lines if "/skillruntime-core" in line)
    extras = tomllib.loads((ROOT / "skillruntime-core/pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert core == f"-e ./skillruntime-core[{','.join(sorted(extras))}]"


def test_every_declared_floor_is_listed_and_the_distributions_themselves_are_not() -> None:
    floors = {tuple(line.split()[:2]) for line in _plan().floors()}
    assert ("tenacity", "8.2.3") in floors
    assert ("opensandbox", "1.1.1") in floors
    assert not any(name.startswith("skillruntime") for name, _ in floors)


def test_requirement_names_are_normalized() -> None:
    plan = _plan()
    assert plan.requirement_name("PyYAML>=6,<7") == "pyyaml"
    assert plan.requirement_name("psycopg[binary]>=3.1.4") == "psycopg"
    assert plan.requirement_name("  # a comment") is None
    assert plan.requirement_name("-e ./x") is None
