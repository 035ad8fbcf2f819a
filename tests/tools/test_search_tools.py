"""The ``ls``, ``glob`` and ``grep`` tools: formats, glob semantics, noise, paging, caps."""

from __future__ import annotations

import pytest

from skillruntime.core.files.globbing import GlobMatcher
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools


@pytest.fixture
def tree(runtime: SkillRuntime) -> str:
    """A small project tree under ``<cwd>/proj``; returns its path."""
    root = runtime.default_working_directory + "/proj"
    fs = runtime.get_file_system()
    fs.write_text(root + "/config.txt", "name = demo\nTODO: fix\n")
    fs.write_text(root + "/nested/child.txt", "hello\nTODO one\nTODO two\n")
    fs.write_text(root + "/nested/deeper/mod.py", "import os\n# todo lower\n")
    fs.write_text(root + "/main.py", "print('TODO')\n")
    fs.write_text(root + "/build", "a file named like a noise directory\n")
    fs.write_text(root + "/node_modules/pkg/index.js", "TODO in noise\n")
    fs.write_text(root + "/.git/config", "TODO in git\n")
    return root


# ----------------------------------------------------------------------- ls


def test_ls_lists_directories_first_with_labels(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("ls", {"path": tree}) == (
        f"{tree}\n  [dir]  nested\n  [file] build\n  [file] config.txt\n  [file] main.py"
    )


def test_ls_depth_and_file_path(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("ls", {"path": tree + "/nested", "depth": 2}) == (
        f"{tree}/nested\n  [dir]  deeper\n  [file] child.txt\n  [file] deeper/mod.py"
    )
    assert tools.dispatch("ls", {"path": tree + "/config.txt"}) == (
        f"{tree}/config.txt\n  [file] config.txt"
    )


def test_ls_defaults_to_working_directory_and_reports_limit(
    runtime: SkillRuntime, tree: str
) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("ls", {}).startswith(runtime.default_working_directory + "\n")
    limited = tools.dispatch("ls", {"path": tree, "max_results": 2})
    assert limited.splitlines()[-1] == (
        "  ... (limit of 2 reached; use a smaller depth or narrow the path)"
    )
    assert len(limited.splitlines()) == 4


def test_ls_root_inside_a_noise_directory_is_allowed(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("ls", {"path": tree + "/node_modules"}) == (
        f"{tree}/node_modules\n  [dir]  pkg"
    )


def test_ls_empty_and_missing(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    empty = runtime.default_working_directory + "/empty"
    runtime.get_file_system().make_directory(empty)
    assert tools.dispatch("ls", {"path": empty}) == f"Directory is empty: {empty}"
    assert tools.dispatch("ls", {"path": empty + "/x"}).startswith("Error: Path does not exist")


# --------------------------------------------------------------------- glob


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "main.py", True),
        ("*.py", "a/b/main.py", True),
        ("*.py", "a/main.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/*.py", "lib/src/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/a.py", True),
        ("**/test_*.py", "tests/unit/test_a.py", True),
        ("docs/**", "docs/a/b.md", True),
        ("docs/**", "other/a.md", False),
        ("*.{md,txt}", "a/readme.md", True),
        ("*.{md,txt}", "notes.txt", True),
        ("*.{md,txt}", "x.py", False),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file10.txt", False),
        ("[ab]*.txt", "b.txt", True),
        ("[!ab]*.txt", "b.txt", False),
        ("./src/*.py", "src/a.py", True),
        ("a*b/c", "aXb/c", True),
        ("a*b/c", "a/b/c", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert GlobMatcher(pattern).matches(path) is expected


def test_glob_returns_absolute_paths_newest_first(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    touched = runtime.execute(
        SkillExecutionRequest(
            command="touch -d @1000000 main.py && touch -d @2000000 nested/deeper/mod.py",
            working_directory=tree,
        )
    )
    assert touched.exit_code == 0, touched.stderr
    assert tools.dispatch("glob", {"pattern": "*.py", "path": tree}) == (
        f"{tree}/nested/deeper/mod.py\n{tree}/main.py"
    )
    assert tools.dispatch("glob", {"pattern": "nested/*.txt", "path": tree}) == (
        f"{tree}/nested/child.txt"
    )
    assert tools.dispatch("glob", {"pattern": "*.js", "path": tree}) == (
        "No files found matching pattern: *.js"
    )


def test_glob_relative_path_and_root_file(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("glob", {"pattern": "**/child.txt", "path": "proj"}) == (
        f"{tree}/nested/child.txt"
    )


# --------------------------------------------------------------------- grep


def test_grep_files_with_matches_skips_noise(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    result = tools.dispatch("grep", {"pattern": "TODO", "path": tree})
    assert sorted(result.splitlines()) == [
        f"{tree}/config.txt",
        f"{tree}/main.py",
        f"{tree}/nested/child.txt",
    ]


def test_grep_content_and_count_modes(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    content = tools.dispatch(
        "grep", {"pattern": "TODO", "path": tree + "/nested", "output_mode": "content"}
    )
    assert content == f"{tree}/nested/child.txt:2:TODO one\n{tree}/nested/child.txt:3:TODO two"
    count = tools.dispatch(
        "grep", {"pattern": "TODO|one", "path": tree + "/nested", "output_mode": "count"}
    )
    assert count == f"{tree}/nested/child.txt:3"
    plain = tools.dispatch(
        "grep",
        {
            "pattern": "hello",
            "path": tree + "/nested",
            "output_mode": "content",
            "show_line_numbers": False,
        },
    )
    assert plain == f"{tree}/nested/child.txt:hello"


def test_grep_context_lines(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    path = runtime.default_working_directory + "/ctx.txt"
    runtime.get_file_system().write_text(path, "a\nb\nMATCH\nc\nd\ne\nf\nMATCH\n")
    result = tools.dispatch(
        "grep", {"pattern": "MATCH", "path": path, "output_mode": "content", "context": 1}
    )
    assert result == (f"{path}-2-b\n{path}:3:MATCH\n{path}-4-c\n--\n{path}-7-f\n{path}:8:MATCH")


def test_grep_filters_case_type_glob_and_multiline(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch(
        "grep", {"pattern": "todo", "path": tree, "case_insensitive": True, "type": "py"}
    ).splitlines() == [f"{tree}/main.py", f"{tree}/nested/deeper/mod.py"]
    assert tools.dispatch("grep", {"pattern": "TODO", "path": tree, "glob": "nested/*"}) == (
        f"{tree}/nested/child.txt"
    )
    multi = tools.dispatch(
        "grep",
        {"pattern": "one.TODO", "path": tree, "multiline": True, "output_mode": "content"},
    )
    assert multi == f"{tree}/nested/child.txt:2:one\nTODO"


def test_grep_offset_without_head_limit_does_not_overflow(runtime: SkillRuntime, tree: str) -> None:
    tools = SkillTools(runtime)
    every = tools.dispatch("grep", {"pattern": "TODO", "path": tree, "output_mode": "content"})
    lines = every.splitlines()
    assert len(lines) == 4
    assert (
        tools.dispatch(
            "grep", {"pattern": "TODO", "path": tree, "output_mode": "content", "offset": 1}
        ).splitlines()
        == lines[1:]
    )
    assert (
        tools.dispatch(
            "grep",
            {
                "pattern": "TODO",
                "path": tree,
                "output_mode": "content",
                "offset": 1,
                "head_limit": 2,
            },
        ).splitlines()
        == lines[1:3]
    )
    assert (
        tools.dispatch("grep", {"pattern": "TODO", "path": tree, "offset": 10})
        == "No matches found for pattern: TODO"
    )


def test_grep_skips_large_files_and_caps_output(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    base = runtime.default_working_directory + "/g"
    fs = runtime.get_file_system()
    fs.write_text(base + "/large.txt", "needle\n" + "x" * (2 * 1024 * 1024))
    fs.write_text(base + "/many.txt", ("needle " + "y" * 90 + "\n") * 2000)
    result = tools.dispatch("grep", {"pattern": "needle", "path": base, "output_mode": "content"})
    assert "large.txt" not in result
    assert result.endswith("more characters)")
    assert len(result) < 100_100
    assert "\n... (output truncated: " in result


def test_grep_invalid_regex_and_missing_path(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("grep", {"pattern": "("}).startswith("Error: Invalid regex pattern: ")
    missing = runtime.default_working_directory + "/no/such/dir"
    assert tools.dispatch("grep", {"pattern": "x", "path": missing}) == (
        f"Error: Path does not exist in {runtime.name} runtime: {missing}"
    )
