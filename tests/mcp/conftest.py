"""Fixtures of the MCP suite: skill trees and conversation roots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"

RESTRICTED_SKILL = """---
name: notes-only
description: Reads notes and echoes short messages. Use it to check tool restrictions.
allowed-tools: Read Grep Bash(echo:*)
---
# Notes only

Read notes with read and grep; say things with echo.
"""


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    """The example skills plus ``notes-only``, whose ``allowed-tools`` restrict the tool set."""
    root = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS, root)
    (root / "notes-only").mkdir()
    (root / "notes-only" / "SKILL.md").write_text(RESTRICTED_SKILL)
    return root


@pytest.fixture
def conversations_root(tmp_path: Path) -> Path:
    """An empty directory for the local runtime's conversation workspaces."""
    root = tmp_path / "conversations"
    root.mkdir()
    return root
