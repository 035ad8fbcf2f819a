"""A skill's declared bootstrap runs when the tools prepare it, with or without ``configs``.

The example skills are used the way a model uses them: ``skill`` activates one, ``bash`` runs its
script from the base directory the activation names. ``text-stats`` exits with code 3 unless its
declared bootstrap (``sh scripts/setup.sh``) ran in the prepared copy. Every test runs through
``SkillTools.dispatch``, ``adispatch`` and :class:`~skillruntime.core.tools.AsyncSkillTools`
(``call_path``), on every runtime of the suite where a ``runtime`` is used.

The conversation tests check that the ready marker means "bootstrapped as declared" whichever
entry point prepared the copy: deepagents' :class:`RuntimeSkills` in the same conversation after
the tools finds a bootstrapped copy, and a copy prepared without the declared commands (as the
tools once did) is never reused as ready.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from deepagents import create_deep_agent
from langchain_core.messages import ToolMessage

from deepagents_agent import ScriptedSkillModel
from skillruntime.core.models import BootstrapCommand, SkillRuntimeConfig
from skillruntime.core.runtime.spi import SkillRuntime, ready_marker_path
from skillruntime.core.skills.files import (
    iter_skill_files,
    prepared_directory_name,
    skill_digest,
)
from skillruntime.core.tools import SkillTools
from skillruntime.deepagents import RuntimeSkills, SkillRuntimeBackend
from skillruntime.local import LocalSkillRuntime

EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"

BASE = re.compile(r"^Base directory for this skill: (.+)$", re.MULTILINE)


@pytest.fixture
def example_skills(tmp_path: Path) -> Path:
    """A copy of ``examples/skills`` (a bootstrap must never write into the repository)."""
    root = tmp_path / "example-skills"
    shutil.copytree(EXAMPLE_SKILLS, root)
    return root


def _activate(tools: SkillTools, name: str) -> str:
    """Activate ``name`` and return the base directory the activation names."""
    activated = tools.dispatch("skill", {"command": name})
    assert not activated.startswith("Error"), activated
    match = BASE.search(activated)
    assert match, activated
    return match.group(1)


def _text_stats(tools: SkillTools, base: str) -> str:
    """Run the text-stats script on its sample and check the report."""
    ran = tools.dispatch(
        "bash", {"command": f"sh {base}/scripts/run.sh {base}/assets/sample.txt 3"}
    )
    assert "not bootstrapped" not in ran, ran
    assert "Exit code" not in ran, ran
    assert "file: sample.txt" in ran
    assert "words: 78" in ran
    assert "unique words: 46" in ran
    assert re.search(r"^\s+5\s+skill$", ran, re.MULTILINE), ran
    return ran


def test_every_example_skill_runs_through_the_tools_without_configs(
    runtime: SkillRuntime, example_skills: Path
) -> None:
    tools = SkillTools(runtime, [example_skills])
    _text_stats(tools, _activate(tools, "text-stats"))
    base = _activate(tools, "csv-report")
    report = tools.dispatch(
        "bash",
        {
            "command": f"python3 {base}/scripts/report.py {base}/assets/sample.csv out "
            "&& cat out/report.md"
        },
    )
    assert "Exit code" not in report, report
    assert "| " in report


def test_a_config_with_only_an_environment_keeps_the_declared_bootstrap(
    runtime: SkillRuntime, example_skills: Path
) -> None:
    config = SkillRuntimeConfig(environment={"TEXT_STATS_NOTE": "set"})
    tools = SkillTools(runtime, [example_skills / "text-stats"], configs={"text-stats": config})
    base = _activate(tools, "text-stats")
    _text_stats(tools, base)
    assert tools.dispatch("bash", {"command": "echo $TEXT_STATS_NOTE"}).strip() == "set"


def test_config_commands_run_after_the_declared_ones(
    runtime: SkillRuntime, example_skills: Path
) -> None:
    after = "test -f build/stopwords.txt && echo after > build/after.txt"
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command=after),))
    tools = SkillTools(runtime, [example_skills / "text-stats"], configs={"text-stats": config})
    base = _activate(tools, "text-stats")
    _text_stats(tools, base)
    assert "after" in tools.dispatch("read", {"file_path": f"{base}/build/after.txt"})


def test_declared_bootstrap_false_replaces_the_declared_commands(
    runtime: SkillRuntime, example_skills: Path
) -> None:
    config = SkillRuntimeConfig(declared_bootstrap=False)
    tools = SkillTools(runtime, [example_skills / "text-stats"], configs={"text-stats": config})
    base = _activate(tools, "text-stats")
    ran = tools.dispatch("bash", {"command": f"sh {base}/scripts/run.sh {base}/assets/sample.txt"})
    assert "Exit code: 3" in ran
    assert "not bootstrapped" in ran


# ------------------------------------------------------------ one conversation, two entry points


def _conversation(root: Path, conversation: str) -> LocalSkillRuntime:
    return LocalSkillRuntime(conversation_id=conversation, conversations_root=root)


def _deepagents_run(runtime: SkillRuntime, skill: Path) -> tuple[RuntimeSkills, str]:
    """A scripted deepagents agent activates text-stats and runs it; the script's output."""
    skills = RuntimeSkills([skill])
    backend = SkillRuntimeBackend(runtime, skills=skills)
    model = ScriptedSkillModel(
        skill="text-stats",
        command=lambda base: f"sh {base}/scripts/run.sh {base}/assets/sample.txt",
    )
    agent = create_deep_agent(model=model, backend=backend, skills=backend.skill_sources)
    state = agent.invoke({"messages": [{"role": "user", "content": "Profile the sample."}]})
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in tools] == ["read_file", "execute"]
    return skills, str(tools[1].content)


def test_runtime_skills_after_the_tools_in_one_conversation_find_a_bootstrapped_copy(
    example_skills: Path, tmp_path: Path
) -> None:
    root = tmp_path / "conversations"
    with _conversation(root, "shared") as first:
        tools = SkillTools(first, [example_skills / "text-stats"])
        base = _activate(tools, "text-stats")
        _text_stats(tools, base)
    with _conversation(root, "shared") as second:
        skills, output = _deepagents_run(second, example_skills / "text-stats")
        prepared = skills.prepared("text-stats")
        assert prepared is not None
        assert prepared.base_path == base  # the same copy, reused: it is bootstrapped
        assert "words: 78" in output
        assert "not bootstrapped" not in output
    copies = sorted(p.name for p in (root / "shared" / "skills").iterdir() if p.is_dir())
    assert copies == [Path(base).name]


def test_a_copy_prepared_without_its_declared_bootstrap_is_never_reused_as_ready(
    example_skills: Path, tmp_path: Path
) -> None:
    """An unbootstrapped copy marked ready (what the tools once left behind) poisons nothing."""
    root = tmp_path / "conversations"
    skill = example_skills / "text-stats"
    bare = SkillRuntimeConfig(declared_bootstrap=False)
    with _conversation(root, "poisoned") as first:
        tools = SkillTools(first, [skill], configs={"text-stats": bare})
        unbootstrapped = _activate(tools, "text-stats")
        assert not (Path(unbootstrapped) / "build").exists()
    with _conversation(root, "poisoned") as second:
        tools = SkillTools(second, [skill])
        base = _activate(tools, "text-stats")
        assert base != unbootstrapped
        _text_stats(tools, base)
    with _conversation(root, "poisoned") as third:
        skills, output = _deepagents_run(third, skill)
        prepared = skills.prepared("text-stats")
        assert prepared is not None
        assert prepared.base_path == base
        assert "words: 78" in output


def test_an_unbootstrapped_copy_left_by_an_earlier_version_is_not_reused(
    example_skills: Path, tmp_path: Path
) -> None:
    """Earlier versions named every copy by its content digest alone and the tools prepared
    without the declared bootstrap, leaving a copy marked ready that is not bootstrapped."""
    root = tmp_path / "conversations"
    skill = example_skills / "text-stats"
    skills_directory = root / "legacy" / "skills"
    legacy = skills_directory / prepared_directory_name(
        "text-stats", skill_digest(iter_skill_files(skill))
    )
    shutil.copytree(skill, legacy)
    Path(ready_marker_path(str(legacy))).write_text("ok\n")
    with _conversation(root, "legacy") as runtime:
        skills, output = _deepagents_run(runtime, skill)
        prepared = skills.prepared("text-stats")
        assert prepared is not None
        assert prepared.base_path != str(legacy)
        assert "words: 78" in output
        assert "not bootstrapped" not in output
        tools = SkillTools(runtime, [skill])
        base = _activate(tools, "text-stats")
        assert base == prepared.base_path
        _text_stats(tools, base)
