"""A remote skill is pinned to the revision activated in the turn (protocol double).

The model reads a skill's instructions at activation; what runs and what is read later in the
turn must belong to that same revision (remote-skill RFC §3.2, §6.1, §9). When the skill changes
on the server in between, the script run or the resource read is refused with
``SKILL_REVISION_CHANGED`` before anything of the new revision is downloaded or run, the skill is
dropped from the turn, and the next ``skill`` call reads its current instructions again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.viking import VikingDouble
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/pinned"
SCRIPT = f"{ROOT}/scripts/run.sh"


def _skill_md(word: str) -> bytes:
    return (
        "---\nname: pinned\ndescription: Prints its revision word.\n"
        "allowed-tools: Bash(sh *) Read\n---\n\n"
        f"INSTRUCTIONS-{word}: run `sh scripts/run.sh`; notes in references/ref.md.\n"
    ).encode()


def _script(word: str) -> bytes:
    return f"#!/bin/sh\necho word={word}\n".encode()


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(
            ROOT,
            {
                "SKILL.md": _skill_md("one"),
                "scripts/run.sh": _script("one"),
                "references/ref.md": b"reference of revision one\n",
            },
            description="Prints its revision word.",
        )
        yield double


@pytest.fixture
def tools(viking: VikingDouble, tmp_path: Path) -> Iterator[SkillTools]:
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, viking_skill_sources(store, [ROOT])) as opened,
    ):
        yield opened


def _revision_two() -> dict[str, bytes]:
    return {"SKILL.md": _skill_md("two"), "scripts/run.sh": _script("two")}


def test_a_script_changed_after_activation_is_refused_and_the_skill_read_again(
    viking: VikingDouble, tools: SkillTools
) -> None:
    run = ("bash", {"command": "sh scripts/run.sh"})
    with tools.turn() as turn:
        activated = turn.call(("skill", {"command": "pinned"}))
        assert "INSTRUCTIONS-one" in activated.content  # what the model read: revision one
        # changed on the server once the activation has answered: a change armed to follow "the
        # next integrity read" relied on the activation making exactly one, and in a loaded
        # run of the suite the activation once read revision two
        for path, data in _revision_two().items():
            viking.set_file(ROOT, path, data)
        refused = turn.call(run)
        assert refused.code == "SKILL_REVISION_CHANGED"
        assert "word=" not in refused.content  # nothing of revision two ran
        assert viking.downloads[SCRIPT] == 0  # refused before downloading
        assert turn.active_skills == []  # dropped: the next call must read the skill again
        reads = viking.skill_reads
        again = turn.call(("skill", {"command": "pinned"}))
        assert viking.skill_reads > reads
        assert "INSTRUCTIONS-two" in again.content
        assert "word=two" in turn.call(run).content


def test_a_resource_changed_after_activation_is_refused_and_the_skill_read_again(
    viking: VikingDouble, tools: SkillTools
) -> None:
    read = ("read", {"file_path": "references/ref.md"})
    with tools.turn() as turn:
        turn.call(("skill", {"command": "pinned"}))
        assert "revision one" in turn.call(read).content
        viking.set_file(ROOT, "references/ref.md", b"reference of revision two\n")
        refused = turn.call(read)
        assert refused.code == "SKILL_REVISION_CHANGED"
        assert "revision two" not in refused.content
        assert turn.active_skills == []
        turn.call(("skill", {"command": "pinned"}))
        assert "revision two" in turn.call(read).content


def test_after_a_refused_download_the_skill_is_read_again_before_the_next_run(
    viking: VikingDouble, tools: SkillTools
) -> None:
    viking.faults.change_on_download[SCRIPT] = ("scripts/run.sh", _script("two"))
    run = ("bash", {"command": "sh scripts/run.sh"})
    with tools.turn() as turn:
        turn.call(("skill", {"command": "pinned"}))
        refused = turn.call(run)  # the skill changed while its package was downloaded
        assert refused.code == "SKILL_REVISION_CHANGED"
        assert turn.active_skills == []
        reads = viking.skill_reads
        again = turn.call(("skill", {"command": "pinned"}))
        assert viking.skill_reads > reads  # not the cached instructions of revision one
        assert not again.is_error
        assert "word=two" in turn.call(run).content


def test_within_a_turn_the_materialized_revision_stays_in_use(
    viking: VikingDouble, tools: SkillTools
) -> None:
    run = ("bash", {"command": "sh scripts/run.sh"})
    with tools.turn() as turn:
        turn.call(("skill", {"command": "pinned"}))
        assert "word=one" in turn.call(run).content
        viking.set_file(ROOT, "scripts/run.sh", _script("two"))
        assert "word=one" in turn.call(run).content  # the pinned copy, not refused
        assert turn.active_skills == ["pinned"]


def test_a_failed_activation_records_the_store_code(
    viking: VikingDouble, tools: SkillTools
) -> None:
    with viking._lock:
        del viking.skills[("default", ROOT)]
    with tools.turn() as turn:
        failed = turn.call(("skill", {"command": "pinned"}))
        assert failed.is_error
        assert failed.code == "SKILL_NOT_FOUND"
        assert failed.content.startswith("Error: SKILL_NOT_FOUND: loading skill 'pinned' failed")


def test_a_materialization_failure_carries_the_store_code_as_its_cause(
    viking: VikingDouble, tools: SkillTools
) -> None:
    with tools.turn() as turn:
        turn.call(("skill", {"command": "pinned"}))
        viking.faults.exhausted.add(ROOT)  # the integrity read of the download answers 429
        failed = turn.call(("bash", {"command": "sh scripts/run.sh"}))
        assert failed.code == "SKILL_MATERIALIZATION_FAILED"
        assert failed.usage.cause == "SKILL_PACKAGE_TOO_LARGE"
        assert failed.usage.as_dict()["cause"] == "SKILL_PACKAGE_TOO_LARGE"
        assert turn.active_skills == ["pinned"]  # not a revision change: the skill stays


def test_the_listing_says_where_a_remote_skill_comes_from(tools: SkillTools) -> None:
    description = tools.get("skill").description  # type: ignore[union-attr]
    assert '<skill source="openviking_user">\n<name>pinned</name>' in description


def test_a_turn_keeps_its_own_pin_when_another_turn_reads_a_newer_revision(
    viking: VikingDouble, tmp_path: Path
) -> None:
    run = ("bash", {"command": "sh scripts/run.sh"})
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
    ):
        shared = viking_skill_sources(store, [ROOT])  # one source object in two tool sets
        with (
            SkillTools(runtime, shared) as first,
            SkillTools(runtime, shared) as second,
            first.turn() as early,
            second.turn() as late,
        ):
            early.call(("skill", {"command": "pinned"}))  # pins revision one
            viking.set_file(ROOT, "scripts/run.sh", _script("two"))
            late.call(("skill", {"command": "pinned"}))  # the source now holds revision two
            refused = early.call(run)
            assert refused.code == "SKILL_REVISION_CHANGED"  # not revision two's script
            assert "word=two" in late.call(run).content  # the other turn is untouched
