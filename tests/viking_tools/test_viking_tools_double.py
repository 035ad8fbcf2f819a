"""Remote skills in the ``skill`` tool over the OpenViking protocol double (fast, no server).

Complements ``test_viking_tools_real.py``: the double counts downloads per file, which makes it
easy to check that several tool sets sharing one store download a skill once, and that a changed
revision on the server reaches a new tool set while an open one keeps its leased copy.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.viking import VikingDouble
from skillruntime.core.tools.toolset import SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import close_sources, viking_skill_sources

ROOT = "viking://user/default/skills/double-greeter"
SKILL_MD = b"""---
name: double-greeter
description: Greets from the double.
allowed-tools: Bash(bash *)
---

Run `bash scripts/greet.sh`.
"""


def _script(word: str) -> bytes:
    return f"#!/bin/sh\necho {word} from the double\n".encode()


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(
            ROOT,
            {"SKILL.md": SKILL_MD, "scripts/greet.sh": _script("hello")},
            description="Greets from the double.",
        )
        yield double


@pytest.fixture
def store(viking: VikingDouble, tmp_path: Path) -> Iterator[VikingSkillStore]:
    with VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as opened:
        yield opened


def _run_greeter(tools: SkillTools) -> str:
    result = tools.dispatch("skill", {"command": "double-greeter"})
    assert "Run `bash scripts/greet.sh`." in result, result
    prepared = tools.prepared_skill("double-greeter")
    assert prepared is not None
    return tools.dispatch("bash", {"command": f"bash {prepared.base_path}/scripts/greet.sh"})


def test_tool_sets_sharing_a_store_download_a_remote_skill_once(
    viking: VikingDouble, store: VikingSkillStore, tmp_path: Path
) -> None:
    outputs: list[str] = []
    barrier = threading.Barrier(3)

    def agent(index: int) -> None:
        sources = viking_skill_sources(store, [ROOT])
        with (
            LocalSkillRuntime(work_root=tmp_path / f"work-{index}") as runtime,
            SkillTools(runtime, sources) as tools,
        ):
            barrier.wait(timeout=30)
            outputs.append(_run_greeter(tools))

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outputs) == 3
    assert all("hello from the double" in output for output in outputs), outputs
    assert viking.downloads[f"{ROOT}/scripts/greet.sh"] == 1
    assert [e.leased for e in store.cache_entries()] == [False]


def test_a_new_revision_reaches_new_tool_sets_while_an_open_one_keeps_its_copy(
    viking: VikingDouble, store: VikingSkillStore, tmp_path: Path
) -> None:
    old_sources = viking_skill_sources(store, [ROOT])
    try:
        with LocalSkillRuntime(work_root=tmp_path / "old") as runtime:
            old_tools = SkillTools(runtime, old_sources)
            assert "hello from the double" in _run_greeter(old_tools)

            viking.set_file(ROOT, "scripts/greet.sh", _script("updated"))
            new_sources = viking_skill_sources(store, [ROOT])
            with (
                LocalSkillRuntime(work_root=tmp_path / "new") as new_runtime,
                SkillTools(new_runtime, new_sources) as new_tools,
            ):
                assert "updated from the double" in _run_greeter(new_tools)
            # The open tool set still runs the revision it prepared.
            assert "hello from the double" in _run_greeter(old_tools)
            revisions = {e.revision for e in store.cache_entries()}
            assert viking.revision(ROOT) in revisions
            assert len(revisions) == 2
    finally:
        close_sources(old_sources)
