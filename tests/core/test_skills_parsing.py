"""SKILL.md parsing: frontmatter delimiters, YAML handling and every Agent Skills field rule."""

from __future__ import annotations

import logging

import pytest

from skillruntime.core.errors import SkillValidationError
from skillruntime.core.skills import (
    InvalidSkillError,
    SkillProblem,
    parse_skill_markdown,
)

BASE = "/skills/demo"


def doc(frontmatter: str, body: str = "Body text.\n") -> str:
    return f"---\n{frontmatter}---\n{body}"


def problems_of(text: str, directory_name: str | None = None) -> list[SkillProblem]:
    with pytest.raises(InvalidSkillError) as info:
        parse_skill_markdown(text, BASE, directory_name=directory_name, strict=True)
    return list(info.value.problems)


def messages(text: str, directory_name: str | None = None) -> str:
    return "\n".join(p.message for p in problems_of(text, directory_name))


# ------------------------------------------------------------------ frontmatter delimiters


def test_minimal_skill_parses_with_body_kept_as_written() -> None:
    body = "# Title\n\n  indented line\n\ntrailing spaces   \n"
    skill = parse_skill_markdown(doc("name: demo\ndescription: Does things.\n", body), BASE)
    assert skill is not None
    assert skill.name == "demo"
    assert skill.description == "Does things."
    assert skill.base_path == BASE
    assert skill.body == body
    assert skill.frontmatter == {"name": "demo", "description": "Does things."}


def test_byte_order_mark_is_tolerated() -> None:
    skill = parse_skill_markdown("\ufeff" + doc("name: demo\ndescription: d\n"), BASE)
    assert skill is not None
    assert skill.name == "demo"


def test_crlf_line_ends_are_tolerated() -> None:
    text = "---\r\nname: demo\r\ndescription: d\r\n---\r\nline one\r\nline two\r\n"
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.name == "demo"
    assert skill.description == "d"
    assert skill.body == "line one\r\nline two\r\n"


def test_triple_dash_inside_a_value_does_not_close_the_frontmatter() -> None:
    text = doc("name: demo\ndescription: before --- after\n")
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.description == "before --- after"
    assert skill.body == "Body text.\n"


def test_indented_triple_dash_in_a_block_scalar_does_not_close_the_frontmatter() -> None:
    text = doc("name: demo\ndescription: |\n  first\n  ---\n  last\n")
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.description == "first\n---\nlast"


def test_triple_dash_in_the_body_stays_in_the_body() -> None:
    skill = parse_skill_markdown(doc("name: demo\ndescription: d\n", "a\n---\nb\n"), BASE)
    assert skill is not None
    assert skill.body == "a\n---\nb\n"


def test_closing_delimiter_at_end_of_file_gives_empty_body() -> None:
    skill = parse_skill_markdown("---\nname: demo\ndescription: d\n---", BASE, strict=True)
    assert skill is not None
    assert skill.body == ""


def test_missing_closing_delimiter_is_an_error() -> None:
    assert "never closed" in messages("---\nname: demo\ndescription: d\nbody\n")


def test_delimiter_followed_by_text_on_the_same_line_does_not_close() -> None:
    assert "never closed" in messages("---\nname: demo\ndescription: d\n--- not a delimiter\n")


def test_frontmatter_must_start_on_the_first_line() -> None:
    assert "must start with a line '---'" in messages("\n---\nname: demo\ndescription: d\n---\n")


def test_text_without_frontmatter_is_skipped_leniently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        assert parse_skill_markdown("# Just markdown\n", BASE) is None
    assert "must start with a line '---'" in caplog.text
    assert "skipping the skill" in caplog.text


def test_empty_frontmatter_is_an_error() -> None:
    assert "frontmatter is empty" in messages("---\n---\nbody\n")


@pytest.mark.parametrize(
    ("yaml_text", "kind"),
    [
        ("- name\n- description\n", "a list"),
        ("just a string\n", "a string"),
        ("!!int 42\n", "an integer"),
    ],
)
def test_non_mapping_frontmatter_is_an_error(yaml_text: str, kind: str) -> None:
    assert f"must be a YAML mapping of keys to values, not {kind}" in messages(doc(yaml_text))


def test_yaml_error_at_end_of_frontmatter_reports_the_line_after_it() -> None:
    # The flow list opened on line 4 is still open when the frontmatter ends (line 5).
    text = doc("name: demo\ndescription: d\nbroken: [unclosed\n")
    found = messages(text)
    assert "not valid YAML at SKILL.md line 5, column 1" in found
    assert "expected ',' or ']'" in found


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_yaml_error_reports_the_skill_md_line_and_column(newline: str) -> None:
    text = newline.join(["---", "name: demo", "description: d", "key: value: other", "---", ""])
    found = messages(text)
    assert "at SKILL.md line 4, column 11: mapping values are not allowed here" in found


def test_duplicate_keys_are_an_error() -> None:
    found = messages(doc("name: demo\nname: other\ndescription: d\n"))
    assert "'name' appears twice" in found
    assert "line 3" in found


def test_lists_and_nested_metadata_are_kept() -> None:
    text = doc(
        "name: demo\n"
        "description: d\n"
        "metadata:\n"
        "  author: me\n"
        "  tags: [a, b]\n"
        "  nested:\n"
        "    deeper: {x: 1}\n"
        "allowed-tools:\n"
        "  - Read\n"
        "  - Bash(git:*)\n"
    )
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.metadata == {
        "author": "me",
        "tags": ["a", "b"],
        "nested": {"deeper": {"x": "1"}},
    }
    assert skill.allowed_tools == ("Read", "Bash(git:*)")


def test_yaml_tags_are_not_executed() -> None:
    text = doc("name: demo\ndescription: !!python/object/apply:os.system ['true']\n")
    assert "not valid YAML" in messages(text)


def test_non_string_top_level_key_is_an_error_and_kept_as_string() -> None:
    text = doc("name: demo\ndescription: d\n!!int 1: one\n")
    assert "frontmatter key '1' must be a string" in messages(text)
    skill = parse_skill_markdown(text, BASE)
    assert skill is not None
    assert skill.frontmatter["1"] == "one"


# ------------------------------------------------------------------------------- name


@pytest.mark.parametrize("name", ["a", "demo", "my-skill-2", "x" * 64, "0-9"])
def test_valid_names_pass(name: str) -> None:
    skill = parse_skill_markdown(doc(f"name: '{name}'\ndescription: d\n"), BASE, strict=True)
    assert skill is not None
    assert skill.name == name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("x" * 65, "is 65 characters; at most 64"),
        ("My-Skill", "only lowercase letters a-z, digits 0-9 and hyphens"),
        ("my_skill", "only lowercase letters a-z, digits 0-9 and hyphens"),
        ("my skill", "only lowercase letters a-z, digits 0-9 and hyphens"),
        ("café", "only lowercase letters a-z, digits 0-9 and hyphens"),
        ("../etc", "only lowercase letters a-z, digits 0-9 and hyphens"),
        ("-demo", "must not start or end with a hyphen"),
        ("demo-", "must not start or end with a hyphen"),
        ("my--skill", "two hyphens in a row"),
    ],
)
def test_invalid_names_are_errors(name: str, expected: str) -> None:
    assert expected in messages(doc(f"name: '{name}'\ndescription: d\n"))


def test_invalid_name_still_loads_leniently_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        skill = parse_skill_markdown(doc("name: My_Skill\ndescription: d\n"), BASE)
    assert skill is not None
    assert skill.name == "My_Skill"
    assert "only lowercase letters" in caplog.text


def test_name_must_match_directory_name() -> None:
    text = doc("name: demo\ndescription: d\n")
    assert "does not match its directory name 'other'" in messages(text, "other")
    assert parse_skill_markdown(text, BASE, directory_name="demo", strict=True) is not None


def test_all_broken_name_rules_are_listed_together() -> None:
    found = messages(doc("name: -Bad--Name-\ndescription: d\n"), "dir")
    assert "only lowercase letters" in found
    assert "start or end with a hyphen" in found
    assert "two hyphens in a row" in found
    assert "does not match its directory name" in found


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", "'name' is missing"),
        ("name:\n", "'name' is missing"),
        ("name: ''\n", "'name' must not be empty"),
        ("name: !!int 123\n", "'name' must be a string, not an integer"),
        ("name: [a]\n", "'name' must be a string, not a list"),
    ],
)
def test_unusable_name_is_an_error_and_skips_leniently(line: str, expected: str) -> None:
    text = doc(f"{line}description: d\n")
    assert expected in messages(text)
    assert parse_skill_markdown(text, BASE) is None


# ------------------------------------------------------------------------ description


def test_description_is_stripped_and_folded_scalars_work() -> None:
    text = doc("name: demo\ndescription: >\n  Does one thing\n  and another.\n")
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.description == "Does one thing and another."


def test_description_of_1024_characters_passes_and_1025_fails() -> None:
    ok = doc(f"name: demo\ndescription: {'d' * 1024}\n")
    assert parse_skill_markdown(ok, BASE, strict=True) is not None
    too_long = doc(f"name: demo\ndescription: {'d' * 1025}\n")
    assert "'description' is 1025 characters; at most 1024" in messages(too_long)
    skill = parse_skill_markdown(too_long, BASE)
    assert skill is not None  # lenient: loaded with a warning


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", "'description' is missing"),
        ("description: '   '\n", "'description' must not be empty"),
        ("description: !!int 12\n", "'description' must be a string, not an integer"),
        ("description: {a: b}\n", "'description' must be a string, not a mapping"),
    ],
)
def test_unusable_description_is_an_error_and_skips_leniently(
    line: str, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = doc(f"name: demo\n{line}")
    assert expected in messages(text)
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        assert parse_skill_markdown(text, BASE) is None
    assert "skipping the skill" in caplog.text


# -------------------------------------------------------------------- optional fields


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Read Write Bash(git:*)", ("Read", "Write", "Bash(git:*)")),
        ("[Read, 'Bash(python *)']", ("Read", "Bash(python *)")),
        ("''", ()),
    ],
)
def test_allowed_tools_string_or_list(value: str, expected: tuple[str, ...]) -> None:
    text = doc(f"name: demo\ndescription: d\nallowed-tools: {value}\n")
    skill = parse_skill_markdown(text, BASE, strict=True)
    assert skill is not None
    assert skill.allowed_tools == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!int 42", "'allowed-tools' must be a space-separated string"),
        ("{Read: true}", "'allowed-tools' must be a space-separated string"),
        ("[Read, !!int 3]", "'allowed-tools' entry 2 must be a non-empty string, not an integer"),
        ("[Read, '']", "'allowed-tools' entry 2 must be a non-empty string"),
    ],
)
def test_allowed_tools_of_other_types_are_errors(value: str, expected: str) -> None:
    assert expected in messages(doc(f"name: demo\ndescription: d\nallowed-tools: {value}\n"))


def test_compatibility_limits() -> None:
    ok = doc(f"name: demo\ndescription: d\ncompatibility: {'c' * 500}\n")
    assert parse_skill_markdown(ok, BASE, strict=True) is not None
    found = messages(doc(f"name: demo\ndescription: d\ncompatibility: {'c' * 501}\n"))
    assert "'compatibility' is 501 characters; at most 500" in found
    assert "'compatibility' must be a string, not a mapping" in messages(
        doc("name: demo\ndescription: d\ncompatibility: {os: linux}\n")
    )
    assert "'compatibility' must not be empty" in messages(
        doc("name: demo\ndescription: d\ncompatibility: ''\n")
    )


def test_license_and_metadata_types() -> None:
    assert "'license' must be a string, not a list" in messages(
        doc("name: demo\ndescription: d\nlicense: [MIT]\n")
    )
    assert "'metadata' must be a mapping, not a string" in messages(
        doc("name: demo\ndescription: d\nmetadata: none\n")
    )


def test_unknown_keys_are_lenient_warnings_and_strict_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = doc("name: demo\ndescription: d\nargument-hint: '[file]'\n")
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        skill = parse_skill_markdown(text, BASE)
    assert skill is not None
    assert skill.frontmatter["argument-hint"] == "[file]"
    assert "warning: unknown frontmatter key 'argument-hint'" in caplog.text
    with pytest.raises(InvalidSkillError) as info:
        parse_skill_markdown(text, BASE, strict=True)
    [problem] = info.value.problems
    assert problem.level == "error"
    assert "unknown frontmatter key 'argument-hint'" in problem.message
    assert "allows only name, description, license, compatibility, metadata" in problem.message


def test_requires_metadata_of_the_wrong_shape_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = doc("name: demo\ndescription: d\nmetadata:\n  requires:\n    bins: python3\n")
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        assert parse_skill_markdown(text, BASE, strict=True) is not None
    assert "'metadata.requires.bins' should be a list of strings" in caplog.text


# ------------------------------------------------------------------- strict vs lenient


def test_strict_error_lists_every_problem_and_is_a_validation_error() -> None:
    text = doc(
        "name: Bad\ndescription: ''\nlicense: [3]\nextra: x\n"
        "metadata:\n  requires:\n    bins: python3\n"
    )
    with pytest.raises(SkillValidationError) as info:
        parse_skill_markdown(text, BASE, directory_name="bad", strict=True)
    error = info.value
    assert isinstance(error, InvalidSkillError)
    levels = sorted(p.level for p in error.problems)
    assert levels.count("warning") == 1
    assert levels.count("error") == 5
    text_of_error = str(error)
    for fragment in (
        "lowercase",
        "directory name",
        "'description' must not be empty",
        "license",
        "unknown frontmatter key 'extra'",
        "'metadata.requires.bins'",
    ):
        assert fragment in text_of_error
    assert all(p.path == f"{BASE}/SKILL.md" for p in error.problems)


def test_lenient_mode_logs_each_problem_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    text = doc("name: Bad\ndescription: d\nlicense: [3]\n")
    with caplog.at_level(logging.DEBUG, logger="skillruntime.core.skills"):
        skill = parse_skill_markdown(text, BASE)
    assert skill is not None
    records = [r for r in caplog.records if r.name == "skillruntime.core.skills"]
    assert len(records) == 2
    assert all(r.levelno == logging.WARNING for r in records)


def test_problem_is_frozen_and_renders_path_level_and_message() -> None:
    problem = SkillProblem("error", "broken", "/x/SKILL.md")
    assert str(problem) == "/x/SKILL.md: error: broken"
    with pytest.raises(AttributeError):
        problem.level = "warning"  # type: ignore[misc]


def test_long_names_are_shortened_in_messages() -> None:
    found = messages(doc(f"name: '{'X' * 5000}'\ndescription: d\n"))
    assert "X" * 100 not in found


@pytest.mark.parametrize(
    "metadata",
    [
        "  a: &x hello\n  b: *x\n",
        "  a: &x [*x]\n",
        "  base: &b {k: v}\n  other:\n    <<: *b\n",
    ],
)
def test_yaml_aliases_are_refused_and_skip_leniently(metadata: str) -> None:
    text = doc(f"name: demo\ndescription: d\nmetadata:\n{metadata}")
    assert "anchors and aliases are not supported" in messages(text)
    assert parse_skill_markdown(text, BASE) is None


def test_anchor_without_alias_is_fine() -> None:
    skill = parse_skill_markdown(doc("name: demo\ndescription: &d text\n"), BASE, strict=True)
    assert skill is not None
    assert skill.description == "text"
