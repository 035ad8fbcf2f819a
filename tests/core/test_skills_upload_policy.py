"""The default upload policy keeps documentation, skips files that hold secrets, and says so."""

from __future__ import annotations

import fnmatch
import logging
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.skills.files import (
    DEFAULT_UPLOAD_POLICY,
    SECRET_FILE_NAMES,
    SECRET_FILE_PATTERNS,
    SkippedFile,
    UploadPolicy,
    iter_skill_files,
    skipped_skill_files,
)

SECRET = "s3cr3t-value-that-must-never-be-logged"


def _kept(root: Path, policy: UploadPolicy = DEFAULT_UPLOAD_POLICY) -> set[str]:
    return {f.relative_path for f in iter_skill_files(root, policy)}


def _write(root: Path, relative: str, text: str = SECRET) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _case_variants(name: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(name), max_size=len(name)).map(
        lambda flips: "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True))
    )


def test_documentation_about_credentials_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "SKILL.md", "---\nname: x\ndescription: d\n---\n")
    for doc in (
        "references/orchestrator/Credentials.md",
        "references/credentials-guide.md",
        "Credentials.md",
        "docs/credentials_setup.txt",
        "keys.md",
    ):
        _write(tmp_path, doc, "how to configure credentials\n")
    assert _kept(tmp_path) == {
        "SKILL.md",
        "Credentials.md",
        "docs/credentials_setup.txt",
        "keys.md",
        "references/credentials-guide.md",
        "references/orchestrator/Credentials.md",
    }
    assert skipped_skill_files(tmp_path) == []


SECRET_NAMES = st.one_of(
    st.sampled_from(SECRET_FILE_NAMES).flatmap(_case_variants),
    st.from_regex(r"\.env\.[A-Za-z0-9_-]{1,12}", fullmatch=True),
    st.tuples(
        st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True),
        st.sampled_from([".pem", ".key", ".p12", ".pfx", ".PEM", ".Key"]),
    ).map("".join),
    st.tuples(
        st.sampled_from(["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]),
        st.sampled_from(["", ".pub", "_backup", ".old"]),
    ).map("".join),
)
FOLDERS = st.lists(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True), max_size=3).map(
    lambda parts: "".join(f"{part}/" for part in parts)
)


@settings(max_examples=60, deadline=None)
@given(FOLDERS, SECRET_NAMES)
def test_files_that_hold_secrets_are_skipped_at_any_depth_and_logged_by_name_only(
    folder: str, name: str
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        _write(root, "SKILL.md", "---\nname: x\ndescription: d\n---\n")
        _write(root, f"{folder}{name}")
        logger = logging.getLogger("skillruntime.core.skills.files")
        records: list[logging.LogRecord] = []
        handler = logging.Handler(logging.INFO)
        handler.emit = records.append  # type: ignore[method-assign]
        logger.addHandler(handler)
        previous = logger.level
        logger.setLevel(logging.INFO)
        try:
            assert _kept(root) == {"SKILL.md"}
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)
        [skipped] = skipped_skill_files(root)
        assert skipped.relative_path == f"{folder}{name}"
        assert skipped.reason.startswith("upload policy: ")
        [record] = records
        message = record.getMessage()
        assert f"{folder}{name}" in message
        assert SECRET not in message


PLAIN_NAMES = st.from_regex(
    r"[A-Za-z0-9][A-Za-z0-9_-]{0,15}(\.(md|txt|py|sh|csv|json))?", fullmatch=True
)


@settings(max_examples=60, deadline=None)
@given(PLAIN_NAMES)
def test_other_files_are_kept(name: str) -> None:
    lowered = name.lower()
    if lowered in {n.lower() for n in SECRET_FILE_NAMES} or lowered.startswith("id_"):
        return  # a secret name by construction; covered above
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        _write(root, f"references/{name}", "text\n")
        assert _kept(root) == {f"references/{name}"}


def test_every_kind_of_skip_is_reported_with_its_reason(tmp_path: Path) -> None:
    _write(tmp_path, "SKILL.md", "---\nname: x\ndescription: d\n---\n")
    _write(tmp_path, ".git/config")
    _write(tmp_path, "sub/.git/HEAD")
    _write(tmp_path, ".env")
    _write(tmp_path, ".env.local")
    _write(tmp_path, "certs/server.pem")
    _write(tmp_path, "credentials.json")
    (tmp_path / "link.md").symlink_to(tmp_path / "SKILL.md")
    assert skipped_skill_files(tmp_path) == [
        SkippedFile(".env", "upload policy: name '.env'"),
        SkippedFile(".env.local", "upload policy: prefix '.env.'"),
        SkippedFile(".git/", "upload policy: directory '.git'"),
        SkippedFile("certs/server.pem", "upload policy: pattern '*.pem'"),
        SkippedFile("credentials.json", "upload policy: name 'credentials.json'"),
        SkippedFile("link.md", "symbolic link (never followed)"),
        SkippedFile("sub/.git/", "upload policy: directory '.git'"),
    ]


def test_the_policy_stays_overridable(tmp_path: Path) -> None:
    _write(tmp_path, "SKILL.md", "---\nname: x\ndescription: d\n---\n")
    _write(tmp_path, "server.pem")
    _write(tmp_path, "references/Credentials.md")
    strict_docs = UploadPolicy(excluded_file_patterns=(*SECRET_FILE_PATTERNS, "credentials*"))
    assert _kept(tmp_path, strict_docs) == {"SKILL.md"}
    keep_keys = UploadPolicy(excluded_file_patterns=())
    assert _kept(tmp_path, keep_keys) == {"SKILL.md", "server.pem", "references/Credentials.md"}


WORDS = st.text(alphabet="aAbB.-_*?[]!", min_size=0, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(WORDS, max_size=3),
    st.lists(WORDS.filter(bool), max_size=3),
    st.lists(WORDS, max_size=3),
    st.text(alphabet="aAbB.-_*?[]!", min_size=1, max_size=8),
)
def test_a_file_is_excluded_exactly_when_one_of_its_rules_matches(
    names: list[str], prefixes: list[str], patterns: list[str], file_name: str
) -> None:
    policy = UploadPolicy(
        excluded_file_names=tuple(names),
        excluded_file_prefixes=tuple(prefixes),
        excluded_file_patterns=tuple(patterns),
    )
    lowered = file_name.lower()
    expected = (
        any(lowered == n.lower() for n in names)
        or any(lowered.startswith(p.lower()) for p in prefixes)
        or any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)
    )
    assert policy.allows_file(file_name) is not expected
    assert (policy.file_rule(file_name) is not None) is expected
