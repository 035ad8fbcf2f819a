"""Loading skills from disk, validating skill directories and discovering skills under a root."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from skillruntime.core.errors import SkillValidationError
from skillruntime.core.models import BootstrapCommand
from skillruntime.core.skills import (
    MAX_SKILL_MD_BYTES,
    InvalidSkillError,
    discover_skills,
    load_skill,
    parse_skill_markdown,
    skill_bootstrap_commands,
    validate_skill_directory,
)

LOGGER = "skillruntime.core.skills"


def make_skill(
    root: Path, directory: str, name: str | None = None, extra: str = "", body: str = "Do it.\n"
) -> Path:
    path = root / directory
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(
        f"---\nname: {name or directory}\ndescription: The {directory} skill.\n{extra}---\n{body}",
        encoding="utf-8",
    )
    return path


# ----------------------------------------------------------------------------- load_skill


def test_load_skill_from_directory_or_skill_md_gives_absolute_base_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_skill(tmp_path, "demo", body="Body.\n")
    monkeypatch.chdir(tmp_path)
    from_dir = load_skill("demo", strict=True)
    from_file = load_skill(Path("demo") / "SKILL.md", strict=True)
    assert from_dir is not None
    assert from_file is not None
    assert from_dir.base_path == str((tmp_path / "demo").resolve())
    assert Path(from_dir.base_path).is_absolute()
    assert from_file == from_dir
    assert from_dir.body == "Body.\n"


def test_load_skill_of_a_missing_path_raises_in_both_modes(tmp_path: Path) -> None:
    for strict in (False, True):
        with pytest.raises(SkillValidationError, match="Skill path does not exist"):
            load_skill(tmp_path / "nope", strict=strict)


def test_load_skill_of_another_file_raises(tmp_path: Path) -> None:
    other = tmp_path / "README.md"
    other.write_text("hi", encoding="utf-8")
    with pytest.raises(SkillValidationError, match=r"expected a skill directory or its SKILL\.md"):
        load_skill(other)


def test_directory_without_skill_md_is_skipped_leniently_and_raises_strictly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "empty").mkdir()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert load_skill(tmp_path / "empty") is None
    assert "no SKILL.md" in caplog.text
    with pytest.raises(InvalidSkillError, match=r"no SKILL\.md"):
        load_skill(tmp_path / "empty", strict=True)


def test_lowercase_skill_md_gets_a_rename_hint(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    directory.mkdir()
    (directory / "skill.md").write_text("---\nname: demo\ndescription: d\n---\n", "utf-8")
    [problem] = validate_skill_directory(directory)
    assert "found 'skill.md': rename it to SKILL.md" in problem.message


def test_skill_md_that_is_a_symbolic_link_is_an_error(tmp_path: Path) -> None:
    real = make_skill(tmp_path, "real")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "SKILL.md").symlink_to(real / "SKILL.md")
    [problem] = validate_skill_directory(linked)
    assert problem.level == "error"
    assert "symbolic link" in problem.message
    assert load_skill(linked) is None


def test_skill_md_over_the_size_limit_is_an_error(tmp_path: Path) -> None:
    path = make_skill(tmp_path, "big")
    with (path / "SKILL.md").open("a", encoding="utf-8") as handle:
        handle.write("x" * MAX_SKILL_MD_BYTES)
    [problem] = validate_skill_directory(path)
    assert "larger than 1048576 bytes (1 MiB)" in problem.message
    with pytest.raises(InvalidSkillError, match="larger than"):
        load_skill(path, strict=True)


def test_skill_md_just_under_the_size_limit_loads(tmp_path: Path) -> None:
    path = make_skill(tmp_path, "big")
    size = (path / "SKILL.md").stat().st_size
    with (path / "SKILL.md").open("a", encoding="utf-8") as handle:
        handle.write("x" * (MAX_SKILL_MD_BYTES - size))
    assert (path / "SKILL.md").stat().st_size == MAX_SKILL_MD_BYTES
    skill = load_skill(path, strict=True)
    assert skill is not None


def test_skill_md_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin"
    path.mkdir()
    (path / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    [problem] = validate_skill_directory(path)
    assert "not UTF-8 (invalid byte at offset 32)" in problem.message


def test_bom_and_crlf_on_disk_load(tmp_path: Path) -> None:
    path = tmp_path / "demo"
    path.mkdir()
    (path / "SKILL.md").write_bytes(
        b"\xef\xbb\xbf---\r\nname: demo\r\ndescription: d\r\n---\r\nBody\r\n"
    )
    skill = load_skill(path, strict=True)
    assert skill is not None
    assert skill.name == "demo"
    assert skill.body == "Body\r\n"


def test_name_must_equal_directory_on_disk(tmp_path: Path) -> None:
    path = make_skill(tmp_path, "folder", name="other")
    with pytest.raises(InvalidSkillError, match="does not match its directory name 'folder'"):
        load_skill(path, strict=True)
    lenient = load_skill(path)
    assert lenient is not None
    assert lenient.name == "other"


# --------------------------------------------------------------- validate_skill_directory


def test_validate_valid_skill_returns_no_problems(tmp_path: Path) -> None:
    assert validate_skill_directory(make_skill(tmp_path, "ok")) == []


def test_validate_returns_errors_and_warnings_without_raising_or_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = make_skill(tmp_path, "Bad_Dir", extra="license: [x]\nhint: y\n")
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        problems = validate_skill_directory(path / "SKILL.md")
    assert caplog.records == []
    assert [p.level for p in problems].count("warning") == 1
    assert [p.level for p in problems].count("error") == 2
    assert all(p.path == str((path / "SKILL.md").resolve()) for p in problems)


def test_validate_missing_directory_is_a_problem(tmp_path: Path) -> None:
    [problem] = validate_skill_directory(tmp_path / "nope")
    assert problem.level == "error"
    assert "does not exist" in problem.message


# ------------------------------------------------------------------------- discovery


def test_discover_finds_immediate_skill_directories_sorted_by_name(tmp_path: Path) -> None:
    make_skill(tmp_path, "zeta")
    make_skill(tmp_path, "alpha")
    make_skill(tmp_path, "mid")
    (tmp_path / "notes").mkdir()  # no SKILL.md: ignored
    (tmp_path / "README.md").write_text("not a skill", encoding="utf-8")
    make_skill(tmp_path, ".hidden")
    make_skill(tmp_path / "group", "nested")  # deeper than one level: not a skill of this root
    skills = discover_skills(tmp_path, strict=True)
    assert [s.name for s in skills] == ["alpha", "mid", "zeta"]
    assert skills[0].base_path == str((tmp_path / "alpha").resolve())


def test_discover_accepts_a_root_that_is_itself_a_skill(tmp_path: Path) -> None:
    root = make_skill(tmp_path, "single")
    make_skill(root, "inner")  # a skill's own subdirectories are not scanned
    assert [s.name for s in discover_skills(root, strict=True)] == ["single"]


def test_discover_selects_by_name(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        make_skill(tmp_path, name)
    assert [s.name for s in discover_skills(tmp_path, names=["c", "a"])] == ["a", "c"]
    assert [s.name for s in discover_skills(tmp_path, names="b")] == ["b"]
    assert discover_skills(tmp_path, names=[]) == []


def test_discover_missing_name_lists_what_exists(tmp_path: Path) -> None:
    make_skill(tmp_path, "a")
    make_skill(tmp_path, "b")
    with pytest.raises(
        SkillValidationError, match=r"No skill named x, y under .*; available: a, b"
    ):
        discover_skills(tmp_path, names=["a", "x", "y"])


def test_discover_rejects_duplicate_names(tmp_path: Path) -> None:
    make_skill(tmp_path, "one", name="same")
    make_skill(tmp_path, "two", name="same")
    with pytest.raises(SkillValidationError, match=r"duplicates: 'same' in .*one, .*two"):
        discover_skills(tmp_path)


def test_discover_does_not_follow_a_symlinked_skill_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = make_skill(tmp_path / "elsewhere", "linked")
    root = tmp_path / "root"
    make_skill(root, "real")
    os.symlink(outside, root / "linked", target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        skills = discover_skills(root, strict=True)
    assert [s.name for s in skills] == ["real"]
    assert "not following symbolic link linked" in caplog.text
    with pytest.raises(SkillValidationError, match="No skill named linked"):
        discover_skills(root, names=["linked"])


def test_discover_missing_root_or_file_root_raises(tmp_path: Path) -> None:
    with pytest.raises(SkillValidationError, match="Skills root does not exist"):
        discover_skills(tmp_path / "missing")
    file_root = tmp_path / "file"
    file_root.write_text("x", encoding="utf-8")
    with pytest.raises(SkillValidationError, match="Skills root is not a directory"):
        discover_skills(file_root)


def test_discover_skips_broken_skills_leniently_and_raises_strictly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(tmp_path, "good")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no frontmatter\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert [s.name for s in discover_skills(tmp_path)] == ["good"]
    assert "skipping the skill" in caplog.text
    with pytest.raises(InvalidSkillError, match="must start with a line '---'"):
        discover_skills(tmp_path, strict=True)


def test_discover_with_names_ignores_problems_of_unselected_skills(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(tmp_path, "good")
    make_skill(tmp_path, "bad", extra="license: [MIT]\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert [s.name for s in discover_skills(tmp_path, names=["good"], strict=True)] == ["good"]
    assert caplog.text == ""
    with pytest.raises(InvalidSkillError, match="'license' must be a string"):
        discover_skills(tmp_path, names=["bad"], strict=True)


def test_discover_selects_an_unusable_skill_by_directory_name_in_strict_mode(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: broken\n---\n", encoding="utf-8")
    with pytest.raises(InvalidSkillError, match="'description' is missing"):
        discover_skills(tmp_path, names=["broken"], strict=True)
    assert discover_skills(tmp_path, names=["broken"]) == []


# ------------------------------------------------------------------- bootstrap metadata


def test_bootstrap_commands_from_strings_and_mappings() -> None:
    text = (
        "---\nname: demo\ndescription: d\nmetadata:\n  skillruntime:\n    bootstrap:\n"
        "      - sh scripts/setup.sh\n"
        "      - {command: make index, timeout_seconds: 30}\n"
        "      - command: echo done\n"
        "---\n"
    )
    skill = parse_skill_markdown(text, "/s/demo", strict=True)
    assert skill is not None
    assert skill_bootstrap_commands(skill) == (
        BootstrapCommand(command="sh scripts/setup.sh"),
        BootstrapCommand(command="make index", timeout_seconds=30.0),
        BootstrapCommand(command="echo done"),
    )


def test_no_bootstrap_section_gives_no_commands() -> None:
    skill = parse_skill_markdown("---\nname: demo\ndescription: d\n---\n", "/s/demo")
    assert skill is not None
    assert skill_bootstrap_commands(skill) == ()


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("    bootstrap: sh setup.sh\n", "must be a list of commands, not a string"),
        ("    bootstrap:\n", "must be a list of commands, not null"),
        ("    bootstrap: ['']\n", "entry 1 is an empty command"),
        ("    bootstrap: [{command: x, timeout_seconds: 0}]\n", "must be a number > 0"),
        ("    bootstrap: [{cmd: x}]\n", "needs a non-empty 'command' string"),
        ("    bootstrap: [{command: x, retries: 2}]\n", "unknown keys: 'retries'"),
        ("    bootstrap: [[x]]\n", "must be a command string or a mapping"),
    ],
)
def test_malformed_bootstrap_is_a_validation_error(section: str, expected: str) -> None:
    text = f"---\nname: demo\ndescription: d\nmetadata:\n  skillruntime:\n{section}---\n"
    with pytest.raises(InvalidSkillError, match=expected):
        parse_skill_markdown(text, "/s/demo", strict=True)
    skill = parse_skill_markdown(text, "/s/demo")
    assert skill is not None
    with pytest.raises(SkillValidationError, match=expected):
        skill_bootstrap_commands(skill)


# ----------------------------------------------------------------------- skip_invalid


def test_skip_invalid_leaves_out_skills_with_errors_and_keeps_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(tmp_path, "good", extra="colour: blue\n")
    make_skill(tmp_path, "renamed", name="other")
    make_skill(tmp_path, "badlicense", extra="license: [MIT]\n")
    assert [s.name for s in discover_skills(tmp_path)] == ["badlicense", "good", "other"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert [s.name for s in discover_skills(tmp_path, skip_invalid=True)] == ["good"]
    assert "skipping the skill at" in caplog.text
    assert caplog.text.count("it has 1 error(s)") == 2


def test_skip_invalid_does_not_count_a_skipped_skill_as_a_duplicate(tmp_path: Path) -> None:
    make_skill(tmp_path, "pdf")
    make_skill(tmp_path, "pdf-old", name="pdf")
    with pytest.raises(SkillValidationError, match="duplicates"):
        discover_skills(tmp_path)
    [skill] = discover_skills(tmp_path, skip_invalid=True)
    assert skill.base_path == str((tmp_path / "pdf").resolve())
