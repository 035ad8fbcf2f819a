"""Upload policy, content digest and prepared-copy naming."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillruntime.core.skills.files import (
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
    policy = UploadPolicy(
        excluded_directories=(), excluded_file_names=(), excluded_file_prefixes=()
    )
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


def _reference_digest(files: list[tuple[str, bytes, bool]]) -> str:
    import hashlib

    outer = hashlib.sha256()
    for rel, data, executable in sorted(files):
        outer.update(rel.encode())
        outer.update(b"\0x\0" if executable else b"\0-\0")
        outer.update(hashlib.sha256(data).digest())
    return outer.hexdigest()


def test_digest_of_a_large_skill_is_the_same_on_several_threads(tmp_path: Path) -> None:
    skill = tmp_path / "big"
    skill.mkdir()
    expected: list[tuple[str, bytes, bool]] = []
    for index in range(13):
        data = bytes([index]) * (900_000 + index)
        (skill / f"f{index:02d}.bin").write_bytes(data)
        expected.append((f"f{index:02d}.bin", data, False))
    assert sum(len(d) for _, d, _ in expected) > 8 * 1024 * 1024
    assert skill_digest(iter_skill_files(skill)) == _reference_digest(expected)
    small = [item for item in iter_skill_files(skill) if item.relative_path < "f02"]
    assert skill_digest(small) == _reference_digest(expected[:2])


def test_hash_memo_skips_rereading_unchanged_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skillruntime.core.skills.files as skillfiles

    skillfiles.clear_hash_memo()
    reads: list[str] = []
    real = skillfiles._file_sha256

    def counting(path: Path, buffer: memoryview) -> bytes:
        reads.append(path.name)
        return real(path, buffer)

    monkeypatch.setattr(skillfiles, "_file_sha256", counting)
    skill = tmp_path / "s"
    skill.mkdir()
    old = skill / "old.txt"
    old.write_text("old")
    recent = skill / "recent.txt"
    recent.write_text("recent")
    # The memo only trusts files whose ctime is old; ctime cannot be set, so pretend time moved on.
    real_now = skillfiles.time.time_ns
    monkeypatch.setattr(skillfiles.time, "time_ns", lambda: real_now() + 10**10)
    first = skill_digest(iter_skill_files(skill))
    assert sorted(reads) == ["old.txt", "recent.txt"]
    reads.clear()
    assert skill_digest(iter_skill_files(skill)) == first
    assert reads == []
    old.write_text("new")  # same size, new content: mtime/ctime change the fingerprint
    monkeypatch.setattr(skillfiles.time, "time_ns", real_now)
    changed = skill_digest(iter_skill_files(skill))
    assert changed != first
    assert reads == ["old.txt"]
    reads.clear()
    skill_digest(iter_skill_files(skill))
    assert reads == ["old.txt"]  # changed just now: not memoised, read again
    skillfiles.clear_hash_memo()
