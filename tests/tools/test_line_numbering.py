"""The read/edit answer formatting against a plain per-line reference implementation.

The tools number lines with a prebuilt ``%`` template and find the edit snippet by scanning for
newlines around the change; both must give exactly what the straightforward per-line code gives.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.tools import files

TEXT = st.text(alphabet="ab%s\n\r\t", max_size=80)


def reference_numbered(lines: list[str], first: int) -> str:
    out = []
    for number, line in enumerate(lines, start=first):
        cut = len(line) > files.MAX_LINE_LENGTH
        shown = line[: files.MAX_LINE_LENGTH] + "... (line truncated)" if cut else line
        out.append(f"{number:6d}\t{shown}\n")
    return "".join(out)


def reference_split(text: str) -> list[str]:
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


@settings(max_examples=400)
@given(TEXT)
def test_split_lines_matches_the_reference(text: str) -> None:
    assert files.split_lines(text) == reference_split(text)


@settings(max_examples=300)
@given(
    st.lists(st.text(alphabet="x%\t", max_size=5), max_size=8),
    st.sampled_from([1, 2, 4090, 4093, 4094, 4096, 5000]),
)
def test_numbered_matches_the_reference(lines: list[str], first: int) -> None:
    assert files.numbered(lines, first) == reference_numbered(lines, first)


@settings(max_examples=300)
@given(TEXT)
def test_split_counts_the_characters_of_the_lines(text: str) -> None:
    lines, chars = files.split_counted(text)
    assert lines == reference_split(text)
    assert chars == sum(map(len, lines))
    assert files.numbered(lines, 1, chars) == reference_numbered(lines, 1)


@settings(max_examples=200)
@given(
    st.lists(
        st.sampled_from(["", "ab", "%s%d", "\t", "y" * files.MAX_LINE_LENGTH]).flatmap(
            lambda base: st.sampled_from([base, base + "z", base + "zz%"])
        ),
        max_size=6,
    ),
    st.sampled_from([1, 3, 4094, 4095, 4096, 9000]),
)
def test_numbered_cuts_exactly_the_lines_over_the_limit(lines: list[str], first: int) -> None:
    assert files.numbered(lines, first) == reference_numbered(lines, first)
    assert files.numbered(lines, first, sum(map(len, lines))) == reference_numbered(lines, first)


def test_numbered_cuts_long_lines() -> None:
    lines = ["short", "y" * (files.MAX_LINE_LENGTH + 5), ""]
    assert files.numbered(lines, 7) == reference_numbered(lines, 7)
    assert "... (line truncated)" in files.numbered(lines, 7)


@settings(max_examples=600)
@given(TEXT, st.integers(0, 80), st.integers(0, 12), TEXT)
def test_edit_window_matches_splitting_the_whole_file(
    text: str, position: int, length: int, new: str
) -> None:
    position = min(position, len(text))
    old = text[position : position + length]
    updated = text[:position] + new + text[position + len(old) :]
    lines = reference_split(updated)
    first_line = text.count("\n", 0, position)
    last_line = updated.count("\n", 0, max(position, position + len(new) - 1))
    start = max(0, first_line - files.SNIPPET_CONTEXT)
    end = min(len(lines), last_line + files.SNIPPET_CONTEXT + 1)
    got_start, window = files.line_window(updated, first_line, position, last_line)
    assert got_start == start
    assert window == lines[start:end]
