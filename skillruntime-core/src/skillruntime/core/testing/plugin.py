"""The pytest plugin of the conformance kit.

Entry point (group ``pytest11``): ``skillruntime.core.testing.plugin``.

It provides the ``skill_factory`` fixture (test skills in a temporary directory) and registers the
``conformance`` marker that every kit test carries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .skills import SkillFactory

__all__ = ["pytest_collection_modifyitems", "pytest_configure", "skill_factory"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``conformance`` marker."""
    config.addinivalue_line(
        "markers", "conformance: a contract test of the skillruntime conformance kit"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test defined by the kit with ``conformance`` (select with ``-m conformance``)."""
    from .suite import RuntimeConformance

    for item in items:
        cls = getattr(item, "cls", None)
        if cls is not None and issubclass(cls, RuntimeConformance):
            item.add_marker(pytest.mark.conformance)


@pytest.fixture
def skill_factory(tmp_path: Path) -> SkillFactory:
    """Builds kit test skills (SKILL.md, executable script, binary asset) under ``tmp_path``."""
    return SkillFactory(tmp_path / "skills")
