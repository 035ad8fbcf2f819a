"""The local runtime's file errors for hostile names print as UTF-8; ``path`` keeps the name.

Names here are what a model or a listing can hand the runtime: bytes that are not UTF-8 (lone
surrogates U+DC80..U+DCFF, ``surrogateescape``), control and format characters, line separators
and backslashes. The messages render them with ``skillruntime.core.errors.printable``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import RuntimeFileError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import LocalSkillRuntime

NAMES = st.lists(
    st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
    | st.characters(categories=["Cc", "Cf", "Zl", "Zp"], exclude_characters="\x00/")
    | st.sampled_from(["\\", "x", "é", " "]),
    min_size=1,
    max_size=12,
).map("".join)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSkillRuntime]:
    root = tmp_path_factory.mktemp("conversations")
    with LocalSkillRuntime(conversation_id="hostile", conversations_root=root) as runtime:
        yield runtime


@settings(max_examples=40, deadline=None)
@given(name=NAMES)
def test_missing_hostile_names_raise_printable_errors(
    runtime: LocalSkillRuntime, name: str
) -> None:
    home = runtime.execute(SkillExecutionRequest(command="pwd")).stdout.strip()
    fs = runtime.get_file_system()
    for path in (f"{home}/gone-{name}", f"{home}/gone-{name}/below"):
        for operation in (fs.read_text, fs.list_directory):
            with pytest.raises(RuntimeFileError) as failed:
                operation(path)
            assert failed.value.path == path
            text = str(failed.value)
            text.encode("utf-8")
            assert text.isprintable(), text
            assert Path(home).name in text
