"""Every refusal of a crafted package, against both stores, leaving nothing behind."""

from __future__ import annotations

import warnings
import zipfile

import pytest
from artifact_helpers import build_zip, good_zip, leftovers, skill_md

from skillruntime.core.artifacts import (
    ArtifactExistsError,
    ArtifactIntegrityError,
    ObjectSkillArtifactStore,
    PackageLimits,
    PackageRejectedError,
    SkillArtifact,
    SkillArtifactStore,
    SkillPackage,
    ZipSkillArtifactStore,
)

SKILL = ("SKILL.md", skill_md("pdf"))


def _symlink(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = 0o120777 << 16
    return info, target.encode()


def _fifo(name: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = 0o010644 << 16
    return info, b""


def _duplicates(*members: tuple[str, str]) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns about duplicate names
        return build_zip(members)


def _nul_name() -> bytes:
    # zipfile truncates names at NUL when writing, so patch the raw headers instead.
    data = build_zip([SKILL, ("evil.txtQQQQ", "x")])
    return data.replace(b"evil.txtQQQQ", b"evil.txt\0QQQ")


CRAFTED: dict[str, tuple[bytes, str]] = {
    "absolute": (build_zip([SKILL, ("/etc/evil", "x")]), "ESCAPE"),
    "dotdot": (build_zip([SKILL, ("../outside.txt", "x")]), "ESCAPE"),
    "nested-dotdot": (build_zip([SKILL, ("scripts/../../outside.txt", "x")]), "ESCAPE"),
    "backslash": (build_zip([SKILL, ("..\\outside.txt", "x")]), "ESCAPE"),
    "drive-letter": (build_zip([SKILL, ("C:/windows/evil", "x")]), "ESCAPE"),
    "dot-segment": (build_zip([SKILL, ("a/./b", "x")]), "ESCAPE"),
    "nul-in-name": (_nul_name(), "ESCAPE"),
    "symlink": (build_zip([SKILL, _symlink("link", "/etc/passwd")]), "SYMLINK"),
    "fifo": (build_zip([SKILL, _fifo("pipe")]), "SPECIAL_FILE"),
    "duplicate": (_duplicates(SKILL, ("a.txt", "1"), ("a.txt", "2")), "DUPLICATE"),
    "case-duplicate": (build_zip([SKILL, ("A.txt", "1"), ("a.txt", "2")]), "DUPLICATE"),
    "file-and-dir": (build_zip([SKILL, ("a", "1"), ("a/b", "2")]), "DUPLICATE"),
    "no-skill-md": (build_zip([("README.md", "no skill here")]), "SKILL_MD"),
    "duplicate-skill-md": (_duplicates(SKILL, SKILL), "DUPLICATE"),
    "case-variant-skill-md": (build_zip([SKILL, ("skill.md", skill_md("pdf"))]), "DUPLICATE"),
    "nested-second-skill-md": (build_zip([SKILL, ("sub/SKILL.md", skill_md("pdf"))]), "SKILL_MD"),
    "skill-md-in-folder": (build_zip([("pdf/SKILL.md", skill_md("pdf"))]), "SKILL_MD"),
    "misnamed": (build_zip([("SKILL.md", skill_md("docx"))]), "NAME_MISMATCH"),
    "no-frontmatter": (build_zip([("SKILL.md", "# pdf\nno frontmatter\n")]), "NAME_MISMATCH"),
    "bomb": (build_zip([SKILL, ("zeros.bin", b"\0" * (8 * 1024 * 1024))]), "COMPRESSION_RATIO"),
    "not-a-zip": (b"this is not a zip archive" * 10, "NOT_A_ZIP"),
}


def _assert_clean(store: SkillArtifactStore) -> None:
    assert leftovers(store) == []
    assert store.list_artifacts() == []


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_package_is_refused_and_leaves_nothing(
    cheap_store: SkillArtifactStore, case: str
) -> None:
    data, reason = CRAFTED[case]
    with pytest.raises(PackageRejectedError) as caught:
        cheap_store.install(
            SkillArtifact(name="pdf", version="1.0.0"), SkillPackage.from_bytes(data)
        )
    assert caught.value.reason == reason
    _assert_clean(cheap_store)


def _with_limits(store: SkillArtifactStore, limits: PackageLimits) -> SkillArtifactStore:
    if isinstance(store, ZipSkillArtifactStore):
        return ZipSkillArtifactStore(store.root, limits=limits)
    assert isinstance(store, ObjectSkillArtifactStore)
    return ObjectSkillArtifactStore(
        store.base, filesystem=store.filesystem, cache_dir=store.cache_dir, limits=limits
    )


def test_too_many_members_is_refused(cheap_store: SkillArtifactStore) -> None:
    store = _with_limits(cheap_store, PackageLimits(max_members=5))
    data = build_zip([SKILL, *((f"f{i}.txt", "x") for i in range(5))])
    with pytest.raises(PackageRejectedError) as caught:
        store.install(SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(data))
    assert caught.value.reason == "TOO_MANY_MEMBERS"
    _assert_clean(store)
    # exactly at the limit is accepted
    ok = build_zip([SKILL, *((f"f{i}.txt", "x") for i in range(4))])
    store.install(SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(ok))


def test_too_large_uncompressed_is_refused(cheap_store: SkillArtifactStore) -> None:
    store = _with_limits(cheap_store, PackageLimits(max_uncompressed_bytes=10_000))
    data = build_zip([SKILL, ("big.bin", bytes(range(256)) * 40)], compression=zipfile.ZIP_STORED)
    with pytest.raises(PackageRejectedError) as caught:
        store.install(SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(data))
    assert caught.value.reason == "TOO_LARGE"
    _assert_clean(store)


def test_too_large_package_is_refused_while_reading(cheap_store: SkillArtifactStore) -> None:
    store = _with_limits(cheap_store, PackageLimits(max_package_bytes=1_000))
    data = build_zip([SKILL, ("big.bin", bytes(range(256)) * 8)], compression=zipfile.ZIP_STORED)
    with pytest.raises(PackageRejectedError) as caught:
        store.install(SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(data))
    assert caught.value.reason == "TOO_LARGE"
    _assert_clean(store)


def test_compression_ratio_guard_is_configurable(cheap_store: SkillArtifactStore) -> None:
    store = _with_limits(cheap_store, PackageLimits(max_compression_ratio=2000))
    data = build_zip([SKILL, ("zeros.bin", b"\0" * (1024 * 1024))])
    installed = store.install(SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(data))
    with store.lease(installed) as directory:
        assert (directory / "zeros.bin").stat().st_size == 1024 * 1024


def test_wrong_declared_digest_is_refused_before_publishing(
    cheap_store: SkillArtifactStore,
) -> None:
    wrong = "sha256:" + "0" * 64
    with pytest.raises(ArtifactIntegrityError) as caught:
        cheap_store.install(
            SkillArtifact(name="pdf", version="1", digest=wrong),
            SkillPackage.from_bytes(good_zip()),
        )
    assert caught.value.code == "DIGEST_MISMATCH"
    _assert_clean(cheap_store)


def test_wrong_declared_size_is_refused_before_publishing(cheap_store: SkillArtifactStore) -> None:
    data = good_zip()
    with pytest.raises(ArtifactIntegrityError) as caught:
        cheap_store.install(
            SkillArtifact(name="pdf", version="1", size=len(data) + 1),
            SkillPackage.from_bytes(data),
        )
    assert caught.value.code == "SIZE_MISMATCH"
    _assert_clean(cheap_store)


def test_existing_version_is_refused_and_left_untouched(cheap_store: SkillArtifactStore) -> None:
    first = cheap_store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    before = sorted(leftovers(cheap_store))
    with pytest.raises(ArtifactExistsError):
        cheap_store.install(
            SkillArtifact(name="pdf", version="1"),
            SkillPackage.from_bytes(good_zip(extra=b"changed\n")),
        )
    assert sorted(leftovers(cheap_store)) == before
    assert cheap_store.list_artifacts() == [first]
    with cheap_store.lease(first) as directory:
        assert (directory / "scripts" / "run.py").read_bytes() == b"print('hi')\n"


def test_declared_matching_digest_and_size_are_accepted(cheap_store: SkillArtifactStore) -> None:
    import hashlib

    data = good_zip()
    declared = SkillArtifact(
        name="pdf",
        version="1",
        digest="sha256-" + hashlib.sha256(data).hexdigest().upper(),
        size=len(data),
    )
    installed = cheap_store.install(declared, SkillPackage.from_bytes(data))
    assert installed.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert installed.size == len(data)
