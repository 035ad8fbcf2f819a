"""User-supplied ``grep`` and ``glob`` patterns finish in bounded time; walks skip special files.

``grep`` compiles patterns with RE2 (linear in the text), ``glob`` matches with the two-pointer
wildcard algorithm per segment and across segments; neither can backtrack exponentially, so no
pattern is ever cut short. Patterns RE2 cannot run in linear time (backreferences, lookaround) and
``{...}`` products beyond the alternatives cap are refused with a plain error. Each test has a
generous pytest-timeout instead of a wall-clock assertion: a pattern that backtracks
exponentially (``(a+)+$`` on 40 ``a`` and a ``!`` takes hours under a backtracking engine) fails it.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillruntime.core.files.globbing import MAX_GLOB_ALTERNATIVES, GlobMatcher, walk
from skillruntime.core.files.linear_regex import InvalidPatternError, LinearPattern
from skillruntime.core.files.wildcard import wildcard_match
from skillruntime.core.models import FileInfo
from skillruntime.core.tools import SkillTools, search
from skillruntime.local import LocalSkillRuntime

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def tools(tmp_path: Path) -> Any:
    runtime = LocalSkillRuntime(work_root=tmp_path / "work")
    yield SkillTools(runtime), runtime
    runtime.close()


ATOMS = st.sampled_from(
    ["a", "a+", "a*", "(a|a)", "(a|aa)", "a?", "[a]", ".", "(?:a+)", "\\w", "a{1,20}"]
)


@st.composite
def nested_quantifier_patterns(draw: st.DrawFn) -> str:
    """Patterns with nested or overlapping quantifiers, the classic backtracking traps."""
    pattern = draw(ATOMS)
    for _ in range(draw(st.integers(1, 4))):
        wrap = draw(st.sampled_from(["({})+", "({})*", "(?:{})+", "({}|{})*", "({}a?)+"]))
        pattern = wrap.replace("{}", pattern)
    return pattern + draw(st.sampled_from(["$", "b", "!?$", "\\d", ""]))


@pytest.mark.timeout(120)
@SETTINGS
@given(pattern=nested_quantifier_patterns(), length=st.integers(20, 3000))
def test_grep_with_nested_quantifiers_returns(tools: Any, pattern: str, length: int) -> None:
    skill_tools, runtime = tools
    path = runtime.default_working_directory + "/trap.txt"
    line = "a" * length + "!"
    runtime.get_file_system().write_text(path, (line + "\n") * 3)
    matched = LinearPattern(pattern).search(line)
    listed = skill_tools.dispatch("grep", {"pattern": pattern, "path": path})
    assert listed == (path if matched else f"No matches found for pattern: {pattern}")
    for mode in ("content", "count"):
        result = skill_tools.dispatch(
            "grep", {"pattern": pattern, "path": path, "output_mode": mode}
        )
        assert result.startswith(path) is matched, result


@pytest.mark.timeout(60)
def test_grep_classic_trap_answers_and_multiline_trap_answers(tools: Any) -> None:
    skill_tools, runtime = tools
    path = runtime.default_working_directory + "/trap.txt"
    runtime.get_file_system().write_text(path, "a" * 5000 + "!\n")
    assert skill_tools.dispatch("grep", {"pattern": "(a+)+$", "path": path}) == (
        "No matches found for pattern: (a+)+$"
    )
    assert skill_tools.dispatch("grep", {"pattern": "(a+)+!$", "path": path}) == path
    assert skill_tools.dispatch("grep", {"pattern": "(a+)+b", "path": path}) == (
        "No matches found for pattern: (a+)+b"
    )
    multi = skill_tools.dispatch(
        "grep", {"pattern": "(a|a)*(.|\\n)*c", "path": path, "multiline": True}
    )
    assert multi == "No matches found for pattern: (a|a)*(.|\\n)*c"


def test_grep_past_its_time_budget_says_the_results_are_partial(
    tools: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill_tools, runtime = tools
    path = runtime.default_working_directory + "/x.txt"
    runtime.get_file_system().write_text(path, "needle\n")
    monkeypatch.setattr(search, "GREP_TIME_BUDGET_SECONDS", -1.0)
    result = skill_tools.dispatch("grep", {"pattern": "needle", "path": path})
    assert result == (
        "No matches found for pattern: needle\n... (search stopped after its -1 s time budget; "
        "results are partial: narrow the path or glob)"
    )


@pytest.mark.parametrize(
    "pattern", ["(a)\\1", "a(?=b)", "a(?!b)", "(?<=a)b", "(?<!a)b", "((a{1,100}){1,100}){1,100}"]
)
def test_grep_refuses_patterns_that_need_backtracking(tools: Any, pattern: str) -> None:
    skill_tools, _ = tools
    result = skill_tools.dispatch("grep", {"pattern": pattern})
    assert result.startswith("Error: Invalid regex pattern: ")
    assert "RE2" in result
    with pytest.raises(InvalidPatternError):
        LinearPattern(pattern)


@pytest.mark.timeout(120)
@SETTINGS
@given(
    stars=st.integers(5, 40),
    letter=st.sampled_from(["a", "?", "[a]", "[!b]"]),
    name_length=st.integers(30, 200),
)
def test_glob_with_many_stars_returns(
    tools: Any, stars: int, letter: str, name_length: int
) -> None:
    skill_tools, runtime = tools
    root = runtime.default_working_directory + "/g"
    runtime.get_file_system().write_text(f"{root}/{'a' * name_length}", "")
    pattern = "*" + ("*".join([letter] * stars)) + "*b"
    assert GlobMatcher(pattern).matches("a" * name_length) is False
    result = skill_tools.dispatch("glob", {"pattern": pattern, "path": root})
    assert result == f"No files found matching pattern: {pattern}"
    deep = "/".join(["**"] * stars) + "/b"
    assert GlobMatcher(deep).matches("/".join(["a"] * name_length)) is False
    assert GlobMatcher(deep).matches("/".join(["a"] * name_length) + "/b") is True


@pytest.mark.timeout(60)
def test_glob_reported_trap_returns(tools: Any) -> None:
    skill_tools, runtime = tools
    root = runtime.default_working_directory + "/g"
    runtime.get_file_system().write_text(f"{root}/{'a' * 60}", "")
    pattern = "*a*a*a*a*a*a*a*a*a*a*b"
    assert skill_tools.dispatch("glob", {"pattern": pattern, "path": root}) == (
        f"No files found matching pattern: {pattern}"
    )
    assert skill_tools.dispatch("glob", {"pattern": "*a*a*a*a*a*a*a*a*a*a", "path": root}) == (
        f"{root}/{'a' * 60}"
    )


def test_glob_refuses_too_many_brace_alternatives(tools: Any) -> None:
    skill_tools, _ = tools
    pattern = "{a,b}" * 9
    assert MAX_GLOB_ALTERNATIVES < 2**9
    result = skill_tools.dispatch("glob", {"pattern": pattern})
    assert result.startswith("Error: Invalid glob pattern: ")
    assert str(MAX_GLOB_ALTERNATIVES) in result
    assert skill_tools.dispatch("grep", {"pattern": "x", "glob": pattern}).startswith(
        "Error: Invalid glob pattern: "
    )


WILD = st.text(st.sampled_from(list("ab*?[]!")), max_size=10)
TEXT = st.text(st.sampled_from(list("ab]!")), max_size=12)


@settings(max_examples=1000, deadline=None, database=None)
@given(pattern=WILD, text=TEXT)
def test_linear_wildcard_agrees_with_fnmatch(pattern: str, text: str) -> None:
    assert wildcard_match(pattern, text) is fnmatch.fnmatchcase(text, pattern)


class _Listing:
    """A file system stand-in: ``list_directory`` returns fixed entries per directory."""

    def __init__(self, entries: dict[str, list[FileInfo]]) -> None:
        self.entries = entries

    def list_directory(self, path: str, depth: int, limit: int) -> list[FileInfo]:
        return self.entries.get(path, [])


def test_walks_skip_special_entries_and_special_roots() -> None:
    fifo = FileInfo(path="/w/pipe", is_directory=False, size=0, is_special=True)
    regular = FileInfo(path="/w/a.txt", is_directory=False, size=1)
    root = FileInfo(path="/w", is_directory=True, size=0)
    listing: Any = _Listing({"/w": [fifo, regular]})
    result = walk(listing, root, depth=5, limit=10, include_directories=True)
    assert [entry.path for entry in result.entries] == ["/w/a.txt"]
    assert walk(listing, fifo, depth=5, limit=10, include_directories=True).entries == []
