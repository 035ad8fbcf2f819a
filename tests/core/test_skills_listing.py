"""The ``skill`` tool's listing: ``when_to_use`` is shown and the listing has a budget."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.models import Skill
from skillruntime.core.tools import LoadedSkillSource, SkillSource, SkillTools
from skillruntime.core.tools.skill import DEFAULT_LISTING_BUDGET, skills_xml

from .kit_reference import ReferenceRuntime

SHORTENED = re.compile(r"\(The descriptions of (\d+) of (\d+) skills were shortened")


def _skill(name: str, description: str, **frontmatter: str) -> Skill:
    return Skill(
        name=name,
        description=description,
        base_path=f"/skills/{name}",
        frontmatter={"name": name, "description": description, **frontmatter},
    )


def _listed(listing: str) -> list[tuple[str, str, str]]:
    return [
        (unescape(name), unescape(description), unescape(location))
        for name, description, location in re.findall(
            r"<skill>\n<name>(.*?)</name>\n<description>(.*?)</description>\n"
            r"<location>(.*?)</location>\n</skill>",
            listing,
            re.DOTALL,
        )
    ]


def test_when_to_use_is_folded_into_the_listing(tmp_path: Path) -> None:
    directory = tmp_path / "skills" / "pdf"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: Fill and merge PDF forms.\n"
        "when_to_use: >-\n  When the user attaches a PDF\n  or asks for a form.\n---\nBody\n"
    )
    runtime = ReferenceRuntime(conversation_id="c1", conversations_root=str(tmp_path / "ws"))
    tools = SkillTools(runtime, [tmp_path / "skills"])
    description = tools.get("skill").description  # type: ignore[union-attr]
    assert (
        "<description>Fill and merge PDF forms.\n"
        "When to use: When the user attaches a PDF or asks for a form.</description>"
    ) in description


def test_a_skill_without_when_to_use_shows_its_description_only() -> None:
    source = LoadedSkillSource(_skill("csv", "Report on CSV files.", when_to_use="  "))
    assert source.description == "Report on CSV files."


def test_seventy_five_real_sized_skills_fit_the_default_budget() -> None:
    description = ("Use this skill to work with documents of one kind in depth. " * 8)[:470]
    sources: list[SkillSource] = [
        LoadedSkillSource(_skill(f"skill-{index:02d}", description)) for index in range(75)
    ]
    unbounded = skills_xml(sources, None)
    bounded = skills_xml(sources)
    assert len(unbounded) > 42_000
    assert len(bounded) <= DEFAULT_LISTING_BUDGET
    listed = _listed(bounded)
    assert [name for name, _, _ in listed] == [f"skill-{index:02d}" for index in range(75)]
    lengths = {len(text) for _, text, _ in listed}
    assert len(lengths) == 1
    assert 100 <= lengths.pop() <= 160
    assert SHORTENED.search(bounded) is not None
    assert SHORTENED.search(bounded).groups() == ("75", "75")  # type: ignore[union-attr]


def test_a_listing_within_the_budget_is_unchanged() -> None:
    sources: list[SkillSource] = [LoadedSkillSource(_skill("a", "short <&> text"))]
    assert skills_xml(sources) == skills_xml(sources, None)
    assert "shortened" not in skills_xml(sources)
    assert "<description>short &lt;&amp;&gt; text</description>" in skills_xml(sources)


DESCRIPTIONS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
    | st.sampled_from("<&>\n"),
    max_size=400,
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.from_regex(r"[a-z]{1,12}", fullmatch=True), DESCRIPTIONS), max_size=40),
    st.integers(min_value=0, max_value=20_000),
)
def test_the_budget_keeps_every_name_and_says_how_many_descriptions_were_cut(
    pairs: list[tuple[str, str]], budget: int
) -> None:
    seen: dict[str, str] = dict(pairs)  # unique names, in first-seen order
    sources: list[SkillSource] = [
        LoadedSkillSource(_skill(name, text.strip() or "d")) for name, text in seen.items()
    ]
    full = skills_xml(sources, None)
    listing = skills_xml(sources, budget)
    listed = _listed(listing)
    assert [name for name, _, _ in listed] == list(seen)
    assert [location for _, _, location in listed] == [f"/skills/{name}" for name in seen]
    if len(full) <= budget:
        assert listing == full
        return
    originals = [source.description for source in sources]
    cut = [text != original for (_, text, _), original in zip(listed, originals, strict=True)]
    match = SHORTENED.search(listing)
    assert match is not None
    assert match.groups() == (str(sum(cut)), str(len(sources)))
    for (_, text, _), original, was_cut in zip(listed, originals, cut, strict=True):
        if was_cut:
            assert text == "" or (text.endswith("…") and original.startswith(text[:-1]))
    empty = skills_xml([LoadedSkillSource(_skill(n, "")) for n in seen], None)
    if len(empty) + 200 <= budget:  # room for the names, locations and the closing note
        assert len(listing) <= budget


def test_skill_tools_apply_their_listing_budget(tmp_path: Path) -> None:
    runtime = ReferenceRuntime(conversation_id="c1", conversations_root=str(tmp_path / "ws"))
    skills = [_skill(f"s{index}", "x" * 200) for index in range(10)]
    bounded = SkillTools(runtime, skills, listing_budget=1_500).get("skill")
    unbounded = SkillTools(runtime, skills, listing_budget=None).get("skill")
    assert bounded is not None
    assert unbounded is not None
    assert "(The descriptions of 10 of 10 skills were shortened" in bounded.description
    assert "x" * 200 in unbounded.description
    assert "shortened" not in unbounded.description


def test_a_negative_budget_is_refused_and_an_empty_listing_fits_any_budget() -> None:
    assert skills_xml([], 0) == ""
    with pytest.raises(ValueError, match="at least 0 characters"):
        skills_xml([], -1)
