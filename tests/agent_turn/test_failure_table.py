"""The failure table of the remote-skill RFC (§9), one row per case, over scripted turns.

Every row builds its situation, runs one turn (the double stands for OpenViking) and checks the
outcome the RFC prescribes. The discovery row (failure or timeout: go on with local skills) is
in ``test_discovery.py``; the rows about cache pruning and turn-copy clean-up failures, which
only log, are not reproduced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from doubles.viking import VikingDouble
from skillruntime.core.tools import SkillTools, SkillTurn, ToolCall
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/table"
SKILL_MD = b"""---
name: table
description: The table skill.
allowed-tools: Bash(sh *) Read
---

Run `sh scripts/run.sh`.
"""
RUN_SH = b"echo table ran > ran.txt\necho table ran\n"


@dataclass
class World:
    """What a row may change before its turn: the double, the store options, the runtime."""

    viking: VikingDouble
    tmp: Path
    store_options: dict[str, Any]

    def tools(self, runtime: LocalSkillRuntime, store: VikingSkillStore) -> SkillTools:
        return SkillTools(runtime, viking_skill_sources(store, [ROOT], resolve=False))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with VikingDouble() as viking:
        viking.add_skill(ROOT, {"SKILL.md": SKILL_MD, "scripts/run.sh": RUN_SH})
        yield World(viking, tmp_path, {"cache_dir": tmp_path / "cache"})


def _ran(runtime: LocalSkillRuntime) -> bool:
    return runtime.get_file_system().exists(f"{runtime.default_working_directory}/ran.txt")


Outcome = Callable[[SkillTurn, LocalSkillRuntime], None]


def _activate_then_run(turn: SkillTurn) -> list[Any]:
    first = turn.dispatch_batch([ToolCall("skill", {"command": "table"}, "s")])
    return [*first, turn.call(("bash", {"command": "sh scripts/run.sh"}))]


# ------------------------------------------------------------------------- rows


def invalid_skill_md(world: World) -> None:
    world.viking.set_file(ROOT, "SKILL.md", b"---\nname: other\ndescription: x\n---\n\nx\n")


def manifest_uri_mismatch(world: World) -> None:
    def hook(result: dict[str, Any]) -> None:
        for entry in result["files"]:
            if entry["path"] == "scripts/run.sh":
                entry["uri"] = "viking://user/default/skills/elsewhere/scripts/run.sh"

    world.viking.faults.manifest_hook = hook


def no_integrity(world: World) -> None:
    def hook(result: dict[str, Any]) -> None:
        for entry in result["files"]:
            entry.pop("sha256", None)

    world.viking.faults.manifest_hook = hook


def package_too_large(world: World) -> None:
    world.store_options["max_files"] = 1


def revision_changes_during_download(world: World) -> None:
    world.viking.faults.change_on_download[f"{ROOT}/scripts/run.sh"] = (
        "scripts/run.sh",
        b"echo changed\n",
    )


def not_activated(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    activation, _ = _activate_then_run(turn)
    assert activation.is_error
    assert turn.active_skills == []
    assert not _ran(runtime)


def same_batch_failure(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    results = turn.dispatch_batch(
        [("skill", {"command": "no-such"}), ("bash", {"command": "echo x > ran.txt"})]
    )
    assert results[1].code == "SKILL_ACTIVATION_FAILED"
    assert not _ran(runtime)


def tool_outside_every_policy(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    turn.dispatch("skill", {"command": "table"})
    assert "write" not in [tool.name for tool in turn._tools.tools]
    assert turn.call(("write", {"file_path": "ran.txt", "content": "x"})).code == (
        "SKILL_TOOL_NOT_ALLOWED"
    )
    assert not _ran(runtime)


def compound_constrained_bash(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    turn.dispatch("skill", {"command": "table"})
    result = turn.call(("bash", {"command": "sh scripts/run.sh && touch ran.txt"}))
    assert result.code == "SKILL_TOOL_NOT_ALLOWED"
    assert not _ran(runtime)


def missing_ambiguous_or_escaping_path(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    turn.dispatch("skill", {"command": "table"})
    for path in ("scripts/absent.sh", "../table/scripts/run.sh", "%2e%2e/x.sh"):
        assert turn.call(("bash", {"command": f"sh {path}"})).code == "SKILL_RESOURCE_NOT_FOUND"
    assert not _ran(runtime)


def missing_requirement(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    # Checked before the skill's first tool use (remote-first activation reads SKILL.md only).
    activation, run = _activate_then_run(turn)
    assert not activation.is_error
    assert run.is_error
    assert "definitely-missing-bin-xyz" in run.content
    assert not _ran(runtime)


def refused_at_materialization(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    activation, run = _activate_then_run(turn)
    assert not activation.is_error  # SKILL.md and manifest were fine
    assert run.is_error
    assert "SKILL_REVISION_CHANGED" in run.content
    assert not _ran(runtime)


def needs_a_missing_bin(world: World) -> None:
    world.viking.set_file(
        ROOT,
        "SKILL.md",
        SKILL_MD.replace(
            b"allowed-tools",
            b"metadata:\n  requires:\n    bins: [definitely-missing-bin-xyz]\nallowed-tools",
        ),
    )


def corrupt_cache_is_rebuilt(world: World) -> None:
    with VikingSkillStore(server_url=world.viking.url, **world.store_options) as store:
        with store.lease(ROOT) as directory:
            pass
        (Path(directory) / "scripts/run.sh").write_bytes(b"echo tampered\n")


def runs_with_a_fresh_download(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    _, run = _activate_then_run(turn)
    assert "table ran" in run.content
    assert _ran(runtime)


def unwritable_cache(world: World) -> None:
    blocker = world.tmp / "not-a-directory"
    blocker.write_text("x")
    world.store_options["cache_dir"] = blocker / "cache"


def runs(turn: SkillTurn, runtime: LocalSkillRuntime) -> None:
    _, run = _activate_then_run(turn)
    assert "table ran" in run.content


ROWS: list[tuple[str, Callable[[World], None] | None, Outcome]] = [
    (
        "SKILL.md invalid or its name differs from the URI: not activated",
        invalid_skill_md,
        not_activated,
    ),
    ("manifest path/URI mismatch: not activated", manifest_uri_mismatch, not_activated),
    ("no integrity data: not activated", no_integrity, not_activated),
    ("same-batch activation failed: every ordinary tool blocked", None, same_batch_failure),
    ("tool outside every skill's permission: hidden and refused", None, tool_outside_every_policy),
    ("constrained Bash with a compound command: refused", None, compound_constrained_bash),
    (
        "relative path missing, ambiguous or escaping: consumer not run",
        None,
        missing_ambiguous_or_escaping_path,
    ),
    ("package over the limits: nothing downloaded or run", package_too_large, not_activated),
    (
        "missing command in the sandbox: names it, installs nothing",
        needs_a_missing_bin,
        missing_requirement,
    ),
    (
        "revision changes during download: refused",
        revision_changes_during_download,
        refused_at_materialization,
    ),
    (
        "cached file altered: entry rebuilt once, tool runs",
        corrupt_cache_is_rebuilt,
        runs_with_a_fresh_download,
    ),
    ("host cache not writable: bypassed, tool runs", unwritable_cache, runs),
]


@pytest.mark.parametrize(("case", "arrange", "outcome"), ROWS, ids=[row[0] for row in ROWS])
def test_failure_table(
    world: World,
    case: str,
    arrange: Callable[[World], None] | None,
    outcome: Outcome,
) -> None:
    if arrange is not None:
        arrange(world)
    with (
        VikingSkillStore(server_url=world.viking.url, **world.store_options) as store,
        LocalSkillRuntime(work_root=world.tmp / "work") as runtime,
        world.tools(runtime, store) as tools,
        tools.turn() as turn,
    ):
        outcome(turn, runtime)
