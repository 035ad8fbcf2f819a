"""Upload policy, content digest and prepared-copy naming."""

from __future__ import annotations

import os
from pathlib import Path

from skillruntime.core.skillfiles import (
    UploadPolicy,
    copy_skill_files,
    iter_skill_files,
    prepared_directory_name,
    skill_digest,
)


def _make_skill(root: Path) -> Path:
    skill = root / "demo"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\nbody\n")
    run = skill / "scripts" / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(0o755)
    (skill / ".git").mkdir()
    (skill / ".git" / "config").write_text("x")
    (skill / ".env").write_text("SECRET=1")
    (skill / ".env.local").write_text("SECRET=1")
    (skill / "Credentials.json").write_text("{}")
    (skill / ".GIT").mkdir(exist_ok=True)
    outside = root / "outside.txt"
    outside.write_text("outside")
    (skill / "link.txt").symlink_to(outside)
    (skill / "linkdir").symlink_to(root)
    return skill


def test_policy_skips_secrets_git_and_symlinks(tmp_path: Path) -> None:
    skill = _make_skill(tmp_path)
    files = list(iter_skill_files(skill))
    assert [f.relative_path for f in files] == ["SKILL.md", "scripts/run.sh"]
    assert [f.executable for f in files] == [False, True]


def test_custom_policy(tmp_path: Path) -> None:
    skill = _make_skill(tmp_path)
    policy = UploadPolicy(excluded_directories=(), excluded_file_names=(), excluded_file_prefixes=())
    names = {f.relative_path for f in iter_skill_files(skill, policy)}
    assert {".env", ".env.local", "Credentials.json", ".git/config"} <= names
    assert "link.txt" not in names


def test_digest_tracks_content_path_and_executable_bit(tmp_path: Path) -> None:
    skill = _make_skill(tmp_path)
    first = skill_digest(iter_skill_files(skill))
    assert first == skill_digest(iter_skill_files(skill))
    assert len(first) == 64
    (skill / ".env").write_text("changed secret")  # excluded: no effect
    assert skill_digest(iter_skill_files(skill)) == first
    (skill / "scripts" / "run.sh").chmod(0o644)
    second = skill_digest(iter_skill_files(skill))
    assert second != first
    (skill / "scripts" / "run.sh").rename(skill / "scripts" / "go.sh")
    third = skill_digest(iter_skill_files(skill))
    assert third not in {first, second}
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: e\n---\n")
    assert skill_digest(iter_skill_files(skill)) not in {first, second, third}


def test_prepared_directory_name() -> None:
    assert prepared_directory_name("csv-report", "ab" * 32) == "csv-report-" + "ab" * 6
    assert prepared_directory_name("Weird Name!!", "0" * 64) == "weird-name-000000000000"
    assert prepared_directory_name("///", "1" * 64) == "skill-111111111111"


def test_copy_keeps_executable_bit_and_layout(tmp_path: Path) -> None:
    skill = _make_skill(tmp_path)
    target = tmp_path / "copy"
    copy_skill_files(list(iter_skill_files(skill)), target)
    assert (target / "SKILL.md").read_text().startswith("---")
    assert os.access(target / "scripts" / "run.sh", os.X_OK)
    assert not os.access(target / "SKILL.md", os.X_OK)
    assert not (target / ".env").exists()
    assert not (target / "link.txt").exists()
