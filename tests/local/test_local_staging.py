"""Copying a skill while hashing it (the cold prepare of the local runtime)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import skillruntime.local.staging as staging
from skillruntime.core.models import Skill, SkillPreparationRequest
from skillruntime.core.skills.files import (
    clear_hash_memo,
    digest_from_hashes,
    iter_skill_files,
    prepared_directory_name,
    skill_digest,
)
from skillruntime.local import LocalSkillRuntime


def _tree(root: Path, count: int, size: int) -> list:
    for index in range(count):
        path = root / f"d{index % 3}" / ("a-b" if index % 4 == 0 else "a") / f"f{index}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
        if index % 2:
            path.chmod(0o755)
    return sorted(iter_skill_files(root), key=lambda item: item.relative_path)


@pytest.mark.parametrize("parallel", [False, True])
def test_copy_and_hash_copies_exact_bytes_and_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    if parallel:
        monkeypatch.setattr(staging, "_PARALLEL_BYTES", 1)
    monkeypatch.setattr(staging, "_CHUNK", 1000)  # several chunks per file
    files = _tree(tmp_path / "src", 13, 3500)
    target = tmp_path / "copy"
    target.mkdir()
    clear_hash_memo()
    hashes = staging.copy_and_hash(files, target)
    for item, file_hash in zip(files, hashes, strict=True):
        copied = target / item.relative_path
        data = item.local_path.read_bytes()
        assert copied.read_bytes() == data
        assert file_hash == hashlib.sha256(data).digest()
        assert copied.stat().st_mode & 0o777 == (0o755 if item.executable else 0o644)
    assert digest_from_hashes(files, hashes) == skill_digest(files)


def test_memoised_hash_is_used_and_fresh_hashes_are_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _tree(tmp_path / "src", 4, 100)
    memoised = b"\x01" * 32
    remembered: list[str] = []
    monkeypatch.setattr(
        staging, "known_file_hash", lambda item: memoised if item is files[0] else None
    )
    monkeypatch.setattr(
        staging, "remember_file_hash", lambda item, _hash: remembered.append(item.relative_path)
    )
    with files[3].local_path.open("ab") as handle:  # changed after the walk
        handle.write(b"more")
    target = tmp_path / "copy"
    target.mkdir()
    hashes = staging.copy_and_hash(files, target)
    assert hashes[0] == memoised  # trusted, not re-hashed
    for item in files:
        assert (target / item.relative_path).read_bytes() == item.local_path.read_bytes()
    assert hashes[1:] == [hashlib.sha256(f.local_path.read_bytes()).digest() for f in files[1:]]
    # the changed file's hash is not filed under the fingerprint taken before the change
    assert remembered == [files[1].relative_path, files[2].relative_path]


def test_copy_and_hash_refuses_a_source_turned_symlink(tmp_path: Path) -> None:
    files = _tree(tmp_path / "src", 2, 10)
    secret = tmp_path / "secret"
    secret.write_text("secret")
    files[0].local_path.unlink()
    files[0].local_path.symlink_to(secret)
    target = tmp_path / "copy"
    target.mkdir()
    with pytest.raises(OSError, match="symbolic links"):
        staging.copy_and_hash(files, target)


def test_cold_prepare_names_the_copy_by_the_unchanged_digest(
    conversation_runtime: LocalSkillRuntime, skill: Skill
) -> None:
    clear_hash_memo()
    [prepared] = conversation_runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    files = list(iter_skill_files(Path(skill.base_path)))
    expected = prepared_directory_name(skill.name, skill_digest(files))
    assert Path(prepared.base_path).name == expected
    copied = sorted(
        str(path.relative_to(prepared.base_path))
        for path in Path(prepared.base_path).rglob("*")
        if path.is_file()
    )
    assert copied == sorted(item.relative_path for item in files)
    skills_root = Path(prepared.base_path).parent
    assert sorted(entry.name for entry in skills_root.iterdir()) == [f".{expected}.ready", expected]


def test_unused_staging_copy_is_removed(
    conversation_runtime: LocalSkillRuntime, skill: Skill, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged copy the prepare does not need (the skill was prepared meanwhile) is removed."""
    monkeypatch.setattr(LocalSkillRuntime, "_has_prepared_copy", lambda *args: False)
    request = SkillPreparationRequest(skills=(skill,))
    [first] = conversation_runtime.prepare(request)
    [second] = conversation_runtime.prepare(request)  # cached: the second staging is unused
    assert first.base_path == second.base_path
    skills_root = Path(first.base_path).parent
    name = Path(first.base_path).name
    assert sorted(entry.name for entry in skills_root.iterdir()) == [f".{name}.ready", name]
