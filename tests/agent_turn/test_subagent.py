"""Rule 8: a subagent gets no remote skills unless given its own, and inherits nothing."""

from __future__ import annotations

from pathlib import Path

from agent_turn.helpers import CountingSource, MakeSkill
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime


def test_a_subagent_gets_local_skills_only_and_nothing_active(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    remote = CountingSource(make_skill("remote"), location="viking://user/u/skills/remote")
    parent = SkillTools(runtime, [make_skill("local", frontmatter="allowed-tools: Read\n"), remote])
    with parent.turn() as turn:
        turn.dispatch("skill", {"command": "local"})
        turn.dispatch("skill", {"command": "remote"})
        with parent.subagent_tools() as child:
            assert child.skill_names == ["local"]
            assert child.active_skills == []
            assert "bash" in [tool.name for tool in child.tools]
            with child.turn() as child_turn:
                assert child_turn.usage == []
                assert "Skill not found" in child_turn.dispatch("skill", {"command": "remote"})
        assert turn.active_skills == ["local", "remote"]
    assert remote.turn_ends == 1  # the child never ended the parent's remote turn


def test_a_subagent_given_remote_sources_gets_its_own_turns(
    runtime: LocalSkillRuntime, make_skill: MakeSkill, tmp_path: Path
) -> None:
    directory = make_skill("remote")
    parent_source = CountingSource(directory, location="viking://user/u/skills/remote")
    child_source = CountingSource(directory, location="viking://user/u/skills/remote")
    parent = SkillTools(runtime, [parent_source])
    with parent.turn() as turn, parent.subagent_tools([child_source]) as child:
        turn.dispatch("skill", {"command": "remote"})
        with child.turn() as child_turn:
            child_turn.dispatch("skill", {"command": "remote"})
        assert (child_source.loads, child_source.turn_ends) == (1, 1)
        assert parent_source.turn_ends == 0
        assert turn.active_skills == ["remote"]
