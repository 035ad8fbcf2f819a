"""The one bootstrap rule of every entry point: declared commands, explicit configs, copy names."""

from __future__ import annotations

import pytest

from skillruntime.core.errors import SkillPrepareError
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.skills import resolve_skill_config, skill_bootstrap_commands
from skillruntime.core.skills.files import prepared_copy_digest

SETUP = BootstrapCommand(command="sh scripts/setup.sh")
EXTRA = BootstrapCommand(command="echo extra", timeout_seconds=5)


def _skill(metadata: object) -> Skill:
    return Skill(name="s", description="d", base_path="/s", frontmatter={"metadata": metadata})


def _declaring() -> Skill:
    return _skill({"skillruntime": {"bootstrap": ["sh scripts/setup.sh"]}})


def test_bootstrap_accepts_strings_and_mappings() -> None:
    config = resolve_skill_config(
        _skill(
            {
                "skillruntime": {
                    "bootstrap": ["pip install x", {"command": "make", "timeout_seconds": 9}]
                }
            }
        )
    )

    assert config.bootstrap == (
        BootstrapCommand(command="pip install x"),
        BootstrapCommand(command="make", timeout_seconds=9),
    )


def test_no_skillruntime_metadata_means_no_bootstrap() -> None:
    assert resolve_skill_config(_skill({"other": 1})).bootstrap == ()


@pytest.mark.parametrize(
    "section",
    [
        "not a mapping",
        {"bootstrap": "make"},
        {"bootstrap": [42]},
        {"bootstrap": [{"command": "make", "timeout_seconds": -1}]},
        {"bootstrap": [{"cmd": "make"}]},
    ],
)
def test_malformed_bootstrap_is_rejected_naming_the_skill(section: object) -> None:
    with pytest.raises(ValueError, match="Skill 's'"):
        resolve_skill_config(_skill({"skillruntime": section}))
    request = SkillPreparationRequest(skills=(_skill({"skillruntime": section}),))
    with pytest.raises(SkillPrepareError, match="Cannot prepare skill 's': Skill 's'") as info:
        request.config_for(request.skills[0])
    assert info.value.skill_name == "s"


def test_without_a_config_the_declared_commands_run() -> None:
    skill = _declaring()
    resolved = resolve_skill_config(skill)
    assert resolved == SkillRuntimeConfig(bootstrap=(SETUP,), declared_bootstrap=False)
    request = SkillPreparationRequest(skills=(skill,))
    assert request.config_for(skill) == resolved


def test_a_config_adds_its_environment_and_commands_after_the_declared_ones() -> None:
    skill = _declaring()
    environment_only = SkillRuntimeConfig(environment={"LANG": "C"})
    assert resolve_skill_config(skill, environment_only) == SkillRuntimeConfig(
        environment={"LANG": "C"}, bootstrap=(SETUP,), declared_bootstrap=False
    )
    more = SkillRuntimeConfig(bootstrap=(EXTRA,))
    request = SkillPreparationRequest(skills=(skill,), configs={"s": more})
    assert request.config_for(skill).bootstrap == (SETUP, EXTRA)


def test_declared_bootstrap_false_replaces_the_declared_commands() -> None:
    skill = _declaring()
    replaced = SkillRuntimeConfig(bootstrap=(EXTRA,), declared_bootstrap=False)
    assert resolve_skill_config(skill, replaced) is replaced
    nothing = SkillRuntimeConfig(declared_bootstrap=False)
    assert resolve_skill_config(skill, nothing).bootstrap == ()


def test_a_malformed_section_is_not_read_when_the_declared_commands_are_replaced() -> None:
    skill = _skill({"skillruntime": {"bootstrap": "make"}})
    replaced = SkillRuntimeConfig(bootstrap=(EXTRA,), declared_bootstrap=False)
    assert resolve_skill_config(skill, replaced).bootstrap == (EXTRA,)


def test_resolving_a_resolved_config_changes_nothing() -> None:
    skill = _declaring()
    once = resolve_skill_config(skill, SkillRuntimeConfig(bootstrap=(EXTRA,)))
    assert resolve_skill_config(skill, once) == once
    request = SkillPreparationRequest(skills=(skill,), configs={"s": once})
    assert request.config_for(skill).bootstrap == (SETUP, EXTRA)
    assert skill_bootstrap_commands(skill) == (SETUP,)


def test_the_copy_digest_covers_the_bootstrap_commands_in_order() -> None:
    content = "ab" * 32
    assert prepared_copy_digest(content, []) == content
    one = prepared_copy_digest(content, ["sh scripts/setup.sh"])
    assert one != content
    assert len(one) == 64
    assert prepared_copy_digest(content, ["sh scripts/setup.sh"]) == one
    assert prepared_copy_digest("cd" * 32, ["sh scripts/setup.sh"]) != one
    assert prepared_copy_digest(content, ["a", "b"]) != prepared_copy_digest(content, ["b", "a"])
    assert prepared_copy_digest(content, ["a b"]) != prepared_copy_digest(content, ["a", "b"])
