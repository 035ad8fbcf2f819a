"""The ``skill`` tool: lazy preparation, once under concurrency, retry after failure."""

from __future__ import annotations

import threading
from typing import Any

from skillruntime.core.models import Skill, SkillRuntimeConfig
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillSource, SkillTools


def test_activation_prepares_and_returns_base_directory_and_instructions(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    tools = SkillTools(wrapped, [make_skill("demo", body="Do the thing.\n")])
    result = tools.dispatch("skill", {"command": "demo"})
    prepared = tools.prepared_skill("demo")
    assert prepared is not None
    assert result == (
        f"Runtime: {runtime.name}\nBase directory for this skill: {prepared.base_path}\n\n"
        "Do the thing.\n"
    )
    assert runtime.get_file_system().exists(prepared.base_path + "/SKILL.md")
    assert tools.active_skills == ["demo"]
    assert tools.dispatch("skill", {"command": "demo"}) == result
    assert wrapped.prepare_calls == 1


def test_unknown_skill_prepares_nothing(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    tools = SkillTools(wrapped, [make_skill("demo")])
    result = tools.dispatch("skill", {"command": "nope"})
    assert result == "Error: Skill not found: nope. Available skills: demo"
    assert wrapped.prepare_calls == 0


def test_eight_threads_cause_one_prepare(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime, delay=0.05)
    tools = SkillTools(wrapped, [make_skill("demo")])
    barrier = threading.Barrier(8)
    results: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        barrier.wait()
        result = tools.dispatch("skill", '{"command": "demo"}')
        with lock:
            results.append(result)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrapped.prepare_calls == 1
    assert len(results) == 8
    assert len(set(results)) == 1
    assert results[0].startswith(f"Runtime: {runtime.name}\nBase directory for this skill: ")


def test_failing_prepare_is_reported_and_retried(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime, fail_first=1)
    tools = SkillTools(wrapped, [make_skill("demo")])
    first = tools.dispatch("skill", {"command": "demo"})
    assert first == (
        f"Error: preparing skill 'demo' in the {runtime.name} runtime failed: "
        "prepare failure number 1"
    )
    assert tools.active_skills == []
    second = tools.dispatch("skill", {"command": "demo"})
    assert second.startswith(f"Runtime: {runtime.name}")
    assert wrapped.prepare_calls == 2
    assert tools.active_skills == ["demo"]


def test_failing_bootstrap_is_an_error_and_retried(runtime: SkillRuntime, make_skill: Any) -> None:
    flag = runtime.default_working_directory + "/bootstrap-ok"
    config = SkillRuntimeConfig.model_validate(
        {"bootstrap": [{"command": f"test -e {flag} || {{ echo not yet >&2; exit 7; }}"}]}
    )
    tools = SkillTools(runtime, [make_skill("demo")], configs={"demo": config})
    first = tools.dispatch("skill", {"command": "demo"})
    assert first.startswith(f"Error: preparing skill 'demo' in the {runtime.name} runtime failed")
    assert "exit code 7" in first
    runtime.get_file_system().write_text(flag, "")
    assert tools.dispatch("skill", {"command": "demo"}).startswith(f"Runtime: {runtime.name}")


def test_config_is_passed_only_for_its_skill(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    config = SkillRuntimeConfig(environment={"DEMO_MODE": "on"})
    tools = SkillTools(wrapped, [make_skill("a"), make_skill("b")], configs={"a": config})
    tools.dispatch("skill", {"command": "a"})
    tools.dispatch("skill", {"command": "b"})
    assert [dict(r.configs) for r in wrapped.prepare_requests] == [{"a": config}, {}]
    assert [r.skills[0].name for r in wrapped.prepare_requests] == ["a", "b"]
    assert tools.dispatch("bash", {"command": 'printf %s "$DEMO_MODE"'}) == "on"


class LazySource:
    """A skill source that materialises its skill only when loaded (like an artifact store)."""

    def __init__(self, skill: Skill, name: str | None = None) -> None:
        self._skill = skill
        self._name = name or skill.name
        self.loads = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return "lazily materialised"

    @property
    def location(self) -> str:
        return "store://demo"

    def load(self) -> Skill:
        self.loads += 1
        return self._skill


def test_skill_sources_load_lazily_on_first_activation(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    source = LazySource(make_skill("demo"))
    assert isinstance(source, SkillSource)
    tools = SkillTools(runtime, [source])
    assert source.loads == 0
    assert "<location>store://demo</location>" in tools.get("skill").description  # type: ignore[union-attr]
    assert tools.dispatch("skill", {"command": "demo"}).startswith(f"Runtime: {runtime.name}")
    tools.dispatch("skill", {"command": "demo"})
    assert source.loads == 1


def test_source_returning_another_skill_is_refused(runtime: SkillRuntime, make_skill: Any) -> None:
    tools = SkillTools(runtime, [LazySource(make_skill("demo"), name="other")])
    result = tools.dispatch("skill", {"command": "other"})
    assert result == "Error: loading skill 'other' failed: the source loaded a skill named 'demo'"
