"""Copying a skill while hashing it (the cold prepare of the local runtime)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skillruntime.core.skills.files as skill_files
import skillruntime.local.staging as staging
from skillruntime.core.models import Skill, SkillPreparationRequest
from skillruntime.core.skills.files import (
    clear_hash_memo,
    digest_from_hashes,
    iter_skill_files,
    prepared_directory_name,
    skill_digest,
)
from skillruntime.local import LocalLayout, LocalSkillRuntime


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
        monkeypatch.setattr(staging, "_idle_cpus", lambda: 3.0)
        assert staging._worker_count(1) == 4
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
    monkeypatch.setattr(LocalLayout, "_has_prepared_copy", lambda *args: False)
    request = SkillPreparationRequest(skills=(skill,))
    [first] = conversation_runtime.prepare(request)
    [second] = conversation_runtime.prepare(request)  # cached: the second staging is unused
    assert first.base_path == second.base_path
    skills_root = Path(first.base_path).parent
    name = Path(first.base_path).name
    assert sorted(entry.name for entry in skills_root.iterdir()) == [f".{name}.ready", name]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.integers(0, 3000),
    change=st.sampled_from(["none", "grow", "shrink", "rewrite"]),
    delta=st.integers(1, 2500),
    memoised=st.booleans(),
)
def test_copy_holds_exactly_the_bytes_hashed_when_the_source_changes_after_the_walk(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    change: str,
    delta: int,
    memoised: bool,
) -> None:
    """Whatever happens to a file between the walk and the copy (it grows past the size the
    walk saw, shrinks, is rewritten; its hash is memoised or not), the copy holds the file's
    bytes as read and the hash returned is theirs; a changed file's hash is never memoised."""
    monkeypatch.setattr(staging, "_CHUNK", 1000)  # single reads and chunked reads both
    root = tmp_path_factory.mktemp("change")
    source = root / "src"
    source.mkdir()
    (source / "f.bin").write_bytes(os.urandom(size))
    [item] = list(iter_skill_files(source))
    before = (source / "f.bin").read_bytes()
    remembered: list[bytes] = []
    monkeypatch.setattr(
        staging,
        "known_file_hash",
        lambda _item: hashlib.sha256(before).digest() if memoised else None,
    )
    monkeypatch.setattr(staging, "remember_file_hash", lambda _item, h: remembered.append(h))
    if change == "grow":
        with (source / "f.bin").open("ab") as handle:
            handle.write(os.urandom(delta))
    elif change == "shrink":
        os.truncate(source / "f.bin", max(0, size - delta))
    elif change == "rewrite":
        (source / "f.bin").write_bytes(os.urandom(delta))
    after = (source / "f.bin").read_bytes()
    target = root / "copy"
    target.mkdir()
    [file_hash] = staging.copy_and_hash([item], target)
    assert (target / "f.bin").read_bytes() == after
    assert file_hash == hashlib.sha256(after).digest()
    if change != "none":
        assert remembered == []
    elif not memoised:
        assert remembered == [file_hash]


def test_modes_are_exact_under_a_strict_umask(tmp_path: Path) -> None:
    files = _tree(tmp_path / "src", 4, 10)
    target = tmp_path / "copy"
    target.mkdir()
    previous = os.umask(0o077)
    try:
        assert not staging._umask_spares_modes()
        staging.copy_and_hash(files, target)
    finally:
        os.umask(previous)
    for item in files:
        mode = (target / item.relative_path).stat().st_mode & 0o777
        assert mode == (0o755 if item.executable else 0o644)
    assert staging._umask_spares_modes() == (previous & 0o755 == 0)


def test_copy_refuses_to_write_through_an_existing_entry(tmp_path: Path) -> None:
    """Files are created new (``O_EXCL``): an entry already in the staging directory, e.g. a
    link planted there, is never written through."""
    files = _tree(tmp_path / "src", 1, 10)
    target = tmp_path / "copy"
    (target / files[0].relative_path).parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (target / files[0].relative_path).symlink_to(outside)
    with pytest.raises(FileExistsError):
        staging.copy_and_hash([files[0]], target)
    assert outside.read_text() == "keep"


def test_threads_are_used_only_for_large_skills_and_idle_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(staging, "_idle_cpus", lambda: 0.7)
    assert staging._worker_count(staging._PARALLEL_BYTES) == 1
    monkeypatch.setattr(staging, "_idle_cpus", lambda: 1.2)
    assert staging._worker_count(staging._PARALLEL_BYTES) == 2
    assert staging._worker_count(staging._PARALLEL_BYTES - 1) == 1
    monkeypatch.setattr(staging, "_idle_cpus", lambda: 64.0)
    assert staging._worker_count(staging._PARALLEL_BYTES) == staging._MAX_WORKERS


@given(
    parts=st.lists(
        st.text(
            st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1
        ),
        min_size=1,
        max_size=4,
    ),
    # A directory entry's name: never "." or ".." (scandir does not list them), no "/" or NUL.
    name=st.text(
        st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1
    ).filter(lambda text: text not in (".", "..")),
    absolute=st.booleans(),
)
def test_walk_builds_the_same_paths_as_pathlib(parts: list[str], name: str, absolute: bool) -> None:
    """The walk's child paths (built without re-parsing) equal what ``/`` gives."""
    base = Path("/" if absolute else ".", *parts)
    child = skill_files._child(base, name)
    assert type(child) is type(base / name)
    assert child == base / name
    assert str(child) == str(base / name)
    assert child.parts == (base / name).parts
