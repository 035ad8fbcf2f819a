"""Fixtures of the deepagents suite: the protocol doubles (one per module) and a skill tree."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.aio import AioDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY

EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"

opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)


@pytest.fixture(scope="module")
def aio_bash() -> Iterator[AioDouble]:
    """An AIO Sandbox double of a current image (``/v1/bash`` commands)."""
    with AioDouble(bash_api=True) as double:
        yield double


@pytest.fixture(scope="module")
def aio_shell() -> Iterator[AioDouble]:
    """An AIO Sandbox double of an older image (commands through ``/v1/shell``)."""
    with AioDouble(bash_api=False) as double:
        yield double


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    """A copy of the repository's example skills."""
    root = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS, root)
    return root
