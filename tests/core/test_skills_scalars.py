"""Frontmatter scalars keep their source text; strict mode accepts only the specification's keys."""

from __future__ import annotations

import logging
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.artifacts.zipcheck import read_package_skill_name
from skillruntime.core.models import BootstrapCommand
from skillruntime.core.skills import (
    KNOWN_FRONTMATTER_KEYS,
    InvalidSkillError,
    discover_skills,
    load_skill,
    parse_skill_markdown,
    skill_bootstrap_commands,
    skill_frontmatter,
    validate_skill_directory,
)

BASE = "/skills/demo"


def _cases(*words: str) -> list[str]:
    return [form for word in words for form in (word, word.capitalize(), word.upper())]


# Every YAML 1.1 implicit type PyYAML's safe loader resolves, as plain scalars.
BOOLS = st.sampled_from(_cases("yes", "no", "true", "false", "on", "off"))
NULLS = st.sampled_from(["~", "null", "Null", "NULL"])
DECIMALS = st.integers(min_value=-(10**12), max_value=10**12).map(str)
OCTALS = st.integers(min_value=1, max_value=8**8).map(lambda n: f"0{n:o}")
HEXES = st.integers(min_value=0, max_value=16**8).map(lambda n: f"0x{n:x}")
BINARIES = st.integers(min_value=0, max_value=2**16).map(lambda n: f"0b{n:b}")
SEXAGESIMAL = st.tuples(st.integers(1, 99), st.integers(0, 59), st.integers(0, 59)).map(
    lambda t: f"{t[0]}:{t[1]:02d}:{t[2]:02d}"
)
FLOATS = st.one_of(
    st.tuples(st.integers(0, 9999), st.integers(0, 9999)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.sampled_from([".inf", "-.inf", "+.INF", ".nan", ".NaN", "1.10", "1.0e+3", "190:20:30.15"]),
)
DATES = st.dates().map(lambda d: d.isoformat()).filter(lambda s: len(s) == 10)
TIMESTAMPS = st.datetimes().map(lambda d: d.isoformat(sep="t")).filter(lambda s: s[:1] != "0")
IMPLICIT_SCALARS = st.one_of(
    BOOLS, NULLS, DECIMALS, OCTALS, HEXES, BINARIES, SEXAGESIMAL, FLOATS, DATES, TIMESTAMPS
)
# The implicit scalars that are also valid skill names (a-z, 0-9 and single inner hyphens).
NAME_SCALARS = st.one_of(
    st.sampled_from(["yes", "no", "true", "false", "on", "off", "null"]),
    st.integers(min_value=0, max_value=10**12).map(str),
    OCTALS,
    HEXES,
    BINARIES,
    DATES.filter(lambda s: s[0] != "-"),
)


def _pyyaml_types_it(text: str) -> bool:
    """True when PyYAML's safe loader would turn the plain scalar into a non-string."""
    return not isinstance(yaml.safe_load(f"v: {text}")["v"], str)


def doc(frontmatter: str, body: str = "Body.\n") -> str:
    return f"---\n{frontmatter}---\n{body}"


@settings(deadline=None)
@given(NAME_SCALARS)
def test_a_name_that_yaml_1_1_would_type_keeps_its_text(text: str) -> None:
    assert _pyyaml_types_it(text)
    skill = parse_skill_markdown(
        doc(f"name: {text}\ndescription: d\n"),
        f"/skills/{text}",
        directory_name=text,
        strict=True,
    )
    assert skill is not None
    assert skill.name == text
    assert skill.frontmatter["name"] == text


@settings(deadline=None)
@given(IMPLICIT_SCALARS)
def test_every_scalar_field_keeps_its_exact_source_text(text: str) -> None:
    assert _pyyaml_types_it(text)
    skill = parse_skill_markdown(
        doc(
            f"name: demo\ndescription: {text}\nlicense: {text}\ncompatibility: {text}\n"
            f"metadata:\n  version: {text}\n  tags: [{text}, plain]\n  nested: {{k: {text}}}\n"
            f"allowed-tools: [{text}]\n"
        ),
        BASE,
    )
    assert skill is not None
    assert skill.description == text
    assert skill.frontmatter["license"] == text
    assert skill.frontmatter["compatibility"] == text
    assert skill.metadata == {"version": text, "tags": [text, "plain"], "nested": {"k": text}}
    assert skill.frontmatter["allowed-tools"] == [text]


@settings(deadline=None)
@given(IMPLICIT_SCALARS)
def test_an_unknown_key_keeps_its_text_too(text: str) -> None:
    skill = parse_skill_markdown(doc(f"name: demo\ndescription: d\nuser-invocable: {text}\n"), BASE)
    assert skill is not None
    assert skill.frontmatter["user-invocable"] == text


def test_a_skill_named_yes_is_loaded_from_disk_and_discovered(tmp_path: Path) -> None:
    for name in ("yes", "no", "2048"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(doc(f"name: {name}\ndescription: d\n"))
    assert validate_skill_directory(tmp_path / "yes") == []
    loaded = load_skill(tmp_path / "2048", strict=True)
    assert loaded is not None
    assert loaded.name == "2048"
    assert [s.name for s in discover_skills(tmp_path, strict=True)] == ["2048", "no", "yes"]


def test_empty_plain_values_are_null_and_quoted_or_tagged_values_behave_as_usual() -> None:
    skill = parse_skill_markdown(
        doc("name: demo\ndescription: d\nlicense:\nmetadata:\n  a: ''\n  b: !!int 7\n  c:\n"),
        BASE,
    )
    assert skill is not None
    assert skill.frontmatter["license"] is None
    assert skill.metadata == {"a": "", "b": 7, "c": None}


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("1.5", 1.5), ("'45'", 45.0)])
def test_bootstrap_timeouts_are_read_from_their_text(text: str, seconds: float) -> None:
    skill = parse_skill_markdown(
        doc(
            "name: demo\ndescription: d\nmetadata:\n  skillruntime:\n    bootstrap:\n"
            f"      - {{command: make, timeout_seconds: {text}}}\n"
        ),
        BASE,
        strict=True,
    )
    assert skill is not None
    assert skill_bootstrap_commands(skill) == (
        BootstrapCommand(command="make", timeout_seconds=seconds),
    )


@pytest.mark.parametrize(
    "text", ["yes", "0", "-3", ".nan", ".inf", "1:30", "soon", "[1]", "!!int 1" + "0" * 400]
)
def test_bootstrap_timeouts_that_are_not_positive_numbers_are_errors(text: str) -> None:
    text_of_skill = doc(
        "name: demo\ndescription: d\nmetadata:\n  skillruntime:\n    bootstrap:\n"
        f"      - {{command: make, timeout_seconds: {text}}}\n"
    )
    with pytest.raises(InvalidSkillError, match="'timeout_seconds' must be a number > 0"):
        parse_skill_markdown(text_of_skill, BASE, strict=True)


# ----------------------------------------------------------------------- strict = the spec

UNKNOWN_KEYS = st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True).filter(
    lambda key: key not in KNOWN_FRONTMATTER_KEYS
)


def test_the_known_keys_are_exactly_the_specification_fields() -> None:
    assert {
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
    } == KNOWN_FRONTMATTER_KEYS


@settings(deadline=None)
@given(UNKNOWN_KEYS)
def test_strict_rejects_any_top_level_key_the_spec_does_not_define(key: str) -> None:
    text = doc(f"name: demo\ndescription: d\n{key}: value\n")
    with pytest.raises(InvalidSkillError) as info:
        parse_skill_markdown(text, BASE, strict=True)
    [problem] = info.value.problems
    assert problem.level == "error"
    assert f"unknown frontmatter key '{key}'" in problem.message
    skill = parse_skill_markdown(text, BASE)
    assert skill is not None
    assert skill.frontmatter[key] == "value"


@pytest.mark.parametrize("key", ["when_to_use", "user-invocable", "argument-hint", "version"])
def test_validate_is_lenient_by_default_and_strict_on_request(
    tmp_path: Path, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "demo"
    directory.mkdir()
    (directory / "SKILL.md").write_text(doc(f"name: demo\ndescription: d\n{key}: x\n"))
    [lenient] = validate_skill_directory(directory)
    [strict] = validate_skill_directory(directory, strict=True)
    assert (lenient.level, strict.level) == ("warning", "error")
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        assert [s.name for s in discover_skills(tmp_path)] == ["demo"]
    assert f"unknown frontmatter key '{key}'" in caplog.text
    with pytest.raises(InvalidSkillError, match=f"unknown frontmatter key '{key}'"):
        discover_skills(tmp_path, strict=True)


def test_every_spec_field_passes_strict_mode() -> None:
    text = doc(
        "name: demo\ndescription: d\nlicense: MIT\ncompatibility: posix\n"
        "metadata: {author: me}\nallowed-tools: Read\n"
    )
    assert parse_skill_markdown(text, BASE, strict=True) is not None


@settings(max_examples=40, deadline=None)
@given(NAME_SCALARS)
def test_skill_packages_read_the_name_the_same_way(text: str) -> None:
    source = doc(f"name: {text}\ndescription: d\n")
    assert skill_frontmatter(source) == {"name": text, "description": "d"}
    with tempfile.TemporaryDirectory() as scratch:
        package = Path(scratch) / "skill.zip"
        with zipfile.ZipFile(package, "w") as archive:
            archive.writestr("SKILL.md", source)
        assert read_package_skill_name(package) == text


def test_skill_frontmatter_of_text_without_a_frontmatter_mapping_is_none() -> None:
    assert skill_frontmatter("# no frontmatter\n") is None
    assert skill_frontmatter("---\nname: [unclosed\n---\n") is None
    assert skill_frontmatter("---\n- a list\n---\n") is None


def _write_skill(root: Path, extra: str) -> Path:
    directory = root / "demo"
    directory.mkdir()
    (directory / "SKILL.md").write_text(
        f"---\nname: demo\ndescription: A demo.\n{extra}---\nBody\n", encoding="utf-8"
    )
    return directory


def test_sources_load_other_agents_keys_but_refuse_broken_skills(tmp_path: Path) -> None:
    """``unknown_keys="warn"`` keeps strict errors while accepting keys of other agents."""
    from skillruntime.core.skills import InvalidSkillError, load_skill

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    other_agent = _write_skill(tmp_path / "a", "when_to_use: Always.\n")
    skill = load_skill(other_agent, strict=True, unknown_keys="warn")
    assert skill is not None
    assert skill.frontmatter["when_to_use"] == "Always."
    with pytest.raises(InvalidSkillError):
        load_skill(other_agent, strict=True)
    broken = _write_skill(tmp_path / "b", "license: [1, 2]\nname2: x\n")
    (broken / "SKILL.md").write_text("---\nname: Demo Bad\n---\n", encoding="utf-8")
    with pytest.raises(InvalidSkillError):
        load_skill(broken, strict=True, unknown_keys="warn")
