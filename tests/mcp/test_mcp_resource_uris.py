"""``skill://`` URIs: round trips, and no URI names a file outside its skill."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillruntime.mcp import parse_skill_uri, skill_uri
from skillruntime.mcp.resources import ResourceUriError

segment = st.text(min_size=1, max_size=12).filter(
    lambda text: (
        text not in (".", "..") and "/" not in text and "\\" not in text and "\x00" not in text
    )
)
names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


@given(names, st.lists(segment, min_size=1, max_size=5))
def test_a_built_uri_parses_back_to_its_skill_and_path(name: str, parts: list[str]) -> None:
    relative = "/".join(parts)
    assert parse_skill_uri(skill_uri(name, relative)) == (name, relative)


@given(st.text(max_size=80))
def test_no_uri_names_a_path_outside_the_skill(tail: str) -> None:
    try:
        name, relative = parse_skill_uri(f"skill://text-stats/{tail}")
    except ResourceUriError:
        return
    assert name == "text-stats"
    joined = posixpath.normpath(posixpath.join("/skills/text-stats", relative))
    assert joined.startswith("/skills/text-stats/")
    assert joined == posixpath.join("/skills/text-stats", relative)


@pytest.mark.parametrize(
    "uri",
    [
        "skill://text-stats/../secret",
        "skill://text-stats/a/%2e%2e/b",
        "skill://text-stats/a%2F..%2F..%2Fb",
        "skill://text-stats/a%5C..%5Cb",
        "skill://text-stats//etc/passwd",
        "skill://text-stats/",
        "skill://text-stats",
        "skill:///SKILL.md",
        "file:///etc/passwd",
        "skill://text-stats/SKILL.md?x=1",
        "skill://text-stats/SKILL.md#top",
        "skill://text-stats/a%00b",
    ],
)
def test_uris_that_leave_the_skill_or_are_malformed_are_refused(uri: str) -> None:
    with pytest.raises(ResourceUriError):
        parse_skill_uri(uri)
