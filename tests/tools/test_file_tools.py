"""The ``read``, ``write`` and ``edit`` tools: numbering, limits, uniqueness, messages."""

from __future__ import annotations

import pytest

from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools


@pytest.fixture
def tools(runtime: SkillRuntime) -> SkillTools:
    return SkillTools(runtime)


def path_in(runtime: SkillRuntime, name: str) -> str:
    return runtime.default_working_directory + "/" + name


def test_read_numbers_lines_with_header(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "a.txt")
    runtime.get_file_system().write_text(path, "one\r\ntwo\nthree\n")
    assert tools.dispatch("read", {"file_path": path}) == (
        f"File: {path}\nShowing lines 1-3 of 3\n\n     1\tone\n     2\ttwo\n     3\tthree\n"
    )


def test_read_offset_and_limit(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "n.txt")
    runtime.get_file_system().write_text(path, "".join(f"l{i}\n" for i in range(1, 11)))
    result = tools.dispatch("read", {"file_path": "n.txt", "offset": 4, "limit": 2})
    assert result == f"File: {path}\nShowing lines 4-5 of 10\n\n     4\tl4\n     5\tl5\n"
    assert tools.dispatch("read", {"file_path": path, "offset": 11}) == (
        "No lines to read. File has 10 lines, but offset was 11"
    )


def test_read_defaults_to_2000_lines(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "big.txt")
    runtime.get_file_system().write_text(path, "x\n" * 2500)
    result = tools.dispatch("read", {"file_path": path})
    assert "Showing lines 1-2000 of 2500" in result
    assert result.endswith("  2000\tx\n")


def test_read_cuts_long_lines(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "long.txt")
    runtime.get_file_system().write_text(path, "y" * 2500 + "\nshort\n")
    result = tools.dispatch("read", {"file_path": path})
    assert f"     1\t{'y' * 2000}... (line truncated)\n     2\tshort\n" in result


def test_read_errors(runtime: SkillRuntime, tools: SkillTools) -> None:
    fs = runtime.get_file_system()
    empty = path_in(runtime, "empty.txt")
    fs.write_text(empty, "")
    assert tools.dispatch("read", {"file_path": empty}) == f"File is empty: {empty}"
    missing = path_in(runtime, "missing.txt")
    assert tools.dispatch("read", {"file_path": missing}) == (
        f"Error: File does not exist in {runtime.name} runtime: {missing}"
    )
    directory = runtime.default_working_directory
    fs.make_directory(directory)
    assert tools.dispatch("read", {"file_path": directory}) == (
        f"Error: Path is a directory, not a file: {directory}"
    )
    huge = path_in(runtime, "huge.txt")
    fs.write_bytes(huge, b"z" * (4 * 1024 * 1024 + 1))
    assert tools.dispatch("read", {"file_path": huge}).startswith(
        f"Error: File is larger than 4 MiB: {huge}"
    )
    binary = path_in(runtime, "bin.dat")
    fs.write_bytes(binary, b"\xff\xfe\x00")
    assert tools.dispatch("read", {"file_path": binary}).startswith(
        f"Error: reading the file from the {runtime.name} runtime failed: File is not valid utf-8"
    )


def test_write_creates_then_overwrites(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "deep/dir/w.txt")
    assert tools.dispatch("write", {"file_path": path, "content": "héllo"}) == (
        f"Successfully created file in {runtime.name} runtime: {path} (6 bytes)"
    )
    assert tools.dispatch("write", {"file_path": path, "content": ""}) == (
        f"Successfully overwrote file in {runtime.name} runtime: {path} (0 bytes)"
    )
    assert runtime.get_file_system().read_text(path) == ""


def test_edit_replaces_a_unique_match_and_shows_a_snippet(
    runtime: SkillRuntime, tools: SkillTools
) -> None:
    path = path_in(runtime, "e.txt")
    fs = runtime.get_file_system()
    fs.write_text(path, "".join(f"line {i}\n" for i in range(1, 11)))
    result = tools.dispatch(
        "edit", {"file_path": path, "old_string": "line 5\n", "new_string": "five\nFIVE\n"}
    )
    assert result == (
        f"The file {path} was updated in {runtime.name} runtime (1 occurrence replaced).\n"
        "     2\tline 2\n     3\tline 3\n     4\tline 4\n     5\tfive\n     6\tFIVE\n"
        "     7\tline 6\n     8\tline 7\n     9\tline 8\n"
    )
    assert fs.read_text(path).count("FIVE") == 1


def test_edit_uniqueness_and_replace_all(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "dup.txt")
    fs = runtime.get_file_system()
    fs.write_text(path, "a-a-a")
    assert tools.dispatch("edit", {"file_path": path, "old_string": "a", "new_string": "b"}) == (
        "Error: old_string appears 3 times. Use a more specific string or set replace_all=true."
    )
    assert fs.read_text(path) == "a-a-a"
    result = tools.dispatch(
        "edit", {"file_path": path, "old_string": "a", "new_string": "", "replace_all": True}
    )
    assert "(3 occurrences replaced)" in result
    assert fs.read_text(path) == "--"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("", "x", "Error: old_string must not be empty"),
        ("same", "same", "Error: old_string and new_string must be different"),
        ("absent", "x", "Error: old_string not found in file: "),
    ],
)
def test_edit_refusals(
    runtime: SkillRuntime, tools: SkillTools, old: str, new: str, expected: str
) -> None:
    path = path_in(runtime, "r.txt")
    runtime.get_file_system().write_text(path, "same text")
    result = tools.dispatch("edit", {"file_path": path, "old_string": old, "new_string": new})
    assert result.startswith(expected)
    assert runtime.get_file_system().read_text(path) == "same text"


def test_edit_missing_file(runtime: SkillRuntime, tools: SkillTools) -> None:
    path = path_in(runtime, "nope.txt")
    result = tools.dispatch("edit", {"file_path": path, "old_string": "a", "new_string": "b"})
    assert result == f"Error: File does not exist in {runtime.name} runtime: {path}"
