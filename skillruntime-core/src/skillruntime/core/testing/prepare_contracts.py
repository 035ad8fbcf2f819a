"""Contracts 1, 2 and 8 (``docs/architecture.md``): prepare, bootstrap and the upload policy."""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path

import pytest

from ..errors import SkillPrepareError
from ..models import BootstrapCommand, Skill, SkillRuntimeConfig
from ..runtime.spi import SkillRuntime
from ..skills.files import (
    iter_skill_files,
    prepared_copy_digest,
    prepared_directory_name,
    skill_digest,
)
from .base import ConformanceBase
from .context import ConformanceContext
from .skills import ALL_BYTES, POLICY_EXCLUDED_PATHS, STANDARD_FILES, append_line_command

__all__ = ["PrepareContracts"]


def _relative_files(runtime: SkillRuntime, base_path: str) -> set[str]:
    entries = runtime.get_file_system().list_files(base_path, limit=10_000)
    prefix = base_path.rstrip("/") + "/"
    found = set()
    for entry in entries:
        assert entry.path.startswith(prefix), f"{entry.path} is not under {base_path}"
        found.add(entry.path[len(prefix) :])
    return found


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mode)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _expected_directory(skill: Skill, config: SkillRuntimeConfig | None = None) -> str:
    """``<safe-name>-<digest12>`` of ``skill`` prepared with ``config``: the digest covers the
    content and the bootstrap commands run in the copy."""
    digest = skill_digest(list(iter_skill_files(Path(skill.base_path))))
    commands = [step.command for step in (config.bootstrap if config else ())]
    return prepared_directory_name(skill.name, prepared_copy_digest(digest, commands))


class PrepareContracts(ConformanceBase):
    """prepare: count/order, new objects, idempotence, digest naming, bootstrap, upload policy."""

    def test_prepare_returns_one_skill_per_request_in_order(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skills = [conformance.skills.create(name) for name in ("zeta", "alpha", "mid-one")]
        prepared = conformance.prepare(runtime, *skills)
        assert [skill.name for skill in prepared] == ["zeta", "alpha", "mid-one"]
        fs = runtime.get_file_system()
        for skill in prepared:
            info = fs.stat(skill.base_path)
            assert info is not None, f"prepared base_path {skill.base_path} does not exist"
            assert info.is_directory
            assert fs.read_text(posixpath.join(skill.base_path, "SKILL.md")).startswith("---")

    def test_prepare_of_an_empty_request_returns_an_empty_list(
        self, conformance: ConformanceContext
    ) -> None:
        assert conformance.prepare(conformance.runtime()) == []

    def test_prepare_returns_new_objects_and_leaves_inputs_untouched(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("untouched")
        before = skill.model_dump()
        source = _snapshot(Path(skill.base_path))
        config = SkillRuntimeConfig(
            bootstrap=(conformance.skills.counting_bootstrap(conformance.log_path("u")),)
        )
        (prepared,) = conformance.prepare(runtime, skill, configs={"untouched": config})
        assert prepared is not skill
        assert skill.model_dump() == before
        assert prepared.name == skill.name
        assert prepared.description == skill.description
        assert prepared.frontmatter == skill.frontmatter
        assert prepared.body == skill.body
        assert prepared.base_path != skill.base_path, "a workspace runtime must prepare a copy"
        assert _snapshot(Path(skill.base_path)) == source, "bootstrap wrote into the source"
        (again,) = conformance.prepare(runtime, skill, configs={"untouched": config})
        assert again is not prepared
        assert again is not skill

    def test_prepared_copy_lives_under_workspace_skills_named_by_digest(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("Digest Named_Skill")
        (prepared,) = conformance.prepare(runtime, skill)
        parent, directory = posixpath.split(prepared.base_path.rstrip("/"))
        assert parent == conformance.skills_directory()
        assert directory == _expected_directory(skill)
        assert directory.startswith("digest-named-skill-")
        assert len(directory.rsplit("-", 1)[1]) == 12

    def test_prepare_in_place_returns_the_source_directory(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("in-place")
        log = conformance.log_path("in-place")
        # Only the log changes: a bootstrap that writes into the skill changes its content.
        command = f"{append_line_command(log)} && pwd >> {shlex.quote(log)}"
        config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command=command),))
        (prepared,) = conformance.prepare(runtime, skill, configs={"in-place": config})
        assert prepared is not skill
        assert prepared.base_path == str(Path(skill.base_path).resolve())
        (again,) = conformance.prepare(runtime, skill, configs={"in-place": config})
        assert again.base_path == prepared.base_path
        lines = runtime.get_file_system().read_text(log).splitlines()
        assert lines == ["run", prepared.base_path], "bootstrap ran again or elsewhere"

    def test_prepared_copy_holds_exact_files_and_bytes(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        (prepared,) = conformance.prepare(runtime, conformance.skills.create("exact"))
        assert _relative_files(runtime, prepared.base_path) >= set(STANDARD_FILES)
        fs = runtime.get_file_system()
        assert fs.read_bytes(posixpath.join(prepared.base_path, "assets/all-bytes.bin")) == (
            ALL_BYTES
        )

    def test_prepared_copy_keeps_executable_bit(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        (prepared,) = conformance.prepare(runtime, conformance.skills.create("exec-bit"))
        out = conformance.check_output(
            runtime,
            "./scripts/hello.sh; [ -x scripts/hello.sh ] && [ ! -x notes/readme.txt ] "
            "&& echo modes-ok",
            cwd=prepared.base_path,
        )
        assert out == "hello from hello.sh\nmodes-ok\n"

    def test_upload_policy_excludes_symlinks_git_env_and_credentials(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create_with_policy_files("policy")
        (prepared,) = conformance.prepare(runtime, skill)
        files = _relative_files(runtime, prepared.base_path)
        assert "nested/kept.txt" in files
        fs = runtime.get_file_system()
        for excluded in POLICY_EXCLUDED_PATHS:
            assert excluded not in files, f"{excluded} was uploaded"
            assert fs.stat(posixpath.join(prepared.base_path, excluded)) is None, excluded
        assert fs.stat(posixpath.join(prepared.base_path, ".git")) is None
        assert not any("inner.txt" in path or "secret" in path for path in files)

    def test_preparing_same_content_again_bootstraps_nothing(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("idem")
        log = conformance.log_path("idem")
        config = SkillRuntimeConfig(bootstrap=(conformance.skills.counting_bootstrap(log),))
        first = conformance.prepare(runtime, skill, configs={"idem": config})
        second = conformance.prepare(runtime, skill, configs={"idem": config})
        assert first[0].base_path == second[0].base_path
        assert conformance.count_lines(runtime, log) == 1

    def test_same_content_from_another_directory_reuses_the_prepared_copy(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        log = conformance.log_path("twin")
        config = SkillRuntimeConfig(bootstrap=(conformance.skills.counting_bootstrap(log),))
        one = conformance.skills.create("twin")
        two = conformance.skills.create("twin")
        assert one.base_path != two.base_path
        (first,) = conformance.prepare(runtime, one, configs={"twin": config})
        (second,) = conformance.prepare(runtime, two, configs={"twin": config})
        assert first.base_path == second.base_path
        assert conformance.count_lines(runtime, log) == 1

    def test_changed_content_gets_a_new_copy(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("changing")
        log = conformance.log_path("changing")
        config = SkillRuntimeConfig(bootstrap=(conformance.skills.counting_bootstrap(log),))
        (first,) = conformance.prepare(runtime, skill, configs={"changing": config})
        (Path(skill.base_path) / "notes" / "readme.txt").write_text("version two\n")
        (second,) = conformance.prepare(runtime, skill, configs={"changing": config})
        assert second.base_path != first.base_path
        assert posixpath.basename(second.base_path) == _expected_directory(skill, config)
        fs = runtime.get_file_system()
        assert fs.read_text(posixpath.join(second.base_path, "notes/readme.txt")) == (
            "version two\n"
        )
        assert conformance.count_lines(runtime, log) == 2

    def test_other_bootstrap_commands_get_another_copy(
        self, conformance: ConformanceContext
    ) -> None:
        """A ready copy is one bootstrapped with exactly the commands asked for: a copy
        prepared with none is not reused for a config that has some, and stays as it was."""
        runtime = conformance.runtime()
        skill = conformance.skills.create("rebooted")
        (bare,) = conformance.prepare(runtime, skill)
        log = conformance.log_path("rebooted")
        config = SkillRuntimeConfig(bootstrap=(conformance.skills.counting_bootstrap(log),))
        (booted,) = conformance.prepare(runtime, skill, configs={"rebooted": config})
        assert booted.base_path != bare.base_path, "a copy bootstrapped otherwise was reused"
        assert posixpath.basename(booted.base_path) == _expected_directory(skill, config)
        assert conformance.count_lines(runtime, log) == 1
        fs = runtime.get_file_system()
        assert fs.read_text(posixpath.join(booted.base_path, "bootstrap-marker.txt")) == "ready\n"
        assert fs.stat(posixpath.join(bare.base_path, "bootstrap-marker.txt")) is None

    def test_bootstrap_runs_in_order_in_the_prepared_root(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        config = SkillRuntimeConfig(
            bootstrap=(
                BootstrapCommand(command="printf 'one\\n' >> order.txt"),
                BootstrapCommand(command="printf 'two\\n' >> order.txt && pwd > where.txt"),
            )
        )
        (prepared,) = conformance.prepare(
            runtime, conformance.skills.create("ordered"), configs={"ordered": config}
        )
        fs = runtime.get_file_system()
        assert fs.read_text(posixpath.join(prepared.base_path, "order.txt")) == "one\ntwo\n"
        where = fs.read_text(posixpath.join(prepared.base_path, "where.txt")).strip()
        assert posixpath.basename(where) == posixpath.basename(prepared.base_path)

    def test_bootstrap_failure_raises_with_exit_code_and_output_tail(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("broken-boot")
        flag = posixpath.join(conformance.workspace(), "kit-never-exists", "flag")
        config = SkillRuntimeConfig(
            bootstrap=(
                BootstrapCommand(
                    command=f"printf 'kit-boom-stdout\\n'; printf 'kit-boom-stderr\\n' >&2; "
                    f"[ -f '{flag}' ] || exit 7"
                ),
            )
        )
        with pytest.raises(SkillPrepareError) as caught:
            conformance.prepare(runtime, skill, configs={"broken-boot": config})
        error = caught.value
        assert error.exit_code == 7
        assert error.skill_name == "broken-boot"
        assert "kit-boom-stdout" in error.output_tail
        assert "kit-boom-stderr" in error.output_tail
        assert not error.timed_out

    def test_bootstrap_failure_caches_nothing_and_next_prepare_retries(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("flaky")
        log = conformance.log_path("flaky")
        flag = posixpath.join(conformance.workspace(), "kit-flaky.flag")
        config = SkillRuntimeConfig(bootstrap=(conformance.skills.fail_once_bootstrap(flag, log),))
        with pytest.raises(SkillPrepareError) as caught:
            conformance.prepare(runtime, skill, configs={"flaky": config})
        assert caught.value.exit_code == 7
        (prepared,) = conformance.prepare(runtime, skill, configs={"flaky": config})
        assert conformance.count_lines(runtime, log) == 2, "the retry must bootstrap again"
        fs = runtime.get_file_system()
        assert fs.read_text(posixpath.join(prepared.base_path, "bootstrap-marker.txt")) == (
            "recovered\n"
        )
        conformance.prepare(runtime, skill, configs={"flaky": config})
        assert conformance.count_lines(runtime, log) == 2

    def test_bootstrap_stops_at_the_first_failing_command(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        log = conformance.log_path("stops")
        config = SkillRuntimeConfig(
            bootstrap=(
                BootstrapCommand(command=f"{append_line_command(log, 'first')}; exit 3"),
                BootstrapCommand(command=append_line_command(log, "second")),
            )
        )
        with pytest.raises(SkillPrepareError) as caught:
            conformance.prepare(
                runtime, conformance.skills.create("stops"), configs={"stops": config}
            )
        assert caught.value.exit_code == 3
        assert runtime.get_file_system().read_text(log) == "first\n"

    def test_bootstrap_timeout_fails_prepare(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        config = SkillRuntimeConfig(
            bootstrap=(
                BootstrapCommand(
                    command="printf 'kit-slow\\n'; sleep 30", timeout_seconds=self.timeout_seconds
                ),
            )
        )
        with pytest.raises(SkillPrepareError) as caught:
            conformance.prepare(
                runtime, conformance.skills.create("slow"), configs={"slow": config}
            )
        assert caught.value.timed_out
        assert "kit-slow" in caught.value.output_tail

    def test_bootstrap_sees_base_and_skill_environment(
        self, conformance: ConformanceContext
    ) -> None:
        base = {"KIT_BASE_VAR": "from-base"} if self.supports_base_environment else {}
        runtime = conformance.runtime(base_environment=base)
        config = SkillRuntimeConfig(
            environment={"KIT_BOOT_VAR": "from-config"},
            bootstrap=(
                BootstrapCommand(
                    command='printf \'%s|%s\' "$KIT_BASE_VAR" "$KIT_BOOT_VAR" > boot-env.txt'
                ),
            ),
        )
        (prepared,) = conformance.prepare(
            runtime, conformance.skills.create("boot-env"), configs={"boot-env": config}
        )
        text = runtime.get_file_system().read_text(
            posixpath.join(prepared.base_path, "boot-env.txt")
        )
        expected_base = "from-base" if self.supports_base_environment else ""
        assert text == f"{expected_base}|from-config"

    def test_skill_environment_is_visible_to_later_commands(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        config = SkillRuntimeConfig(environment={"KIT_SKILL_VAR": "skill value ✓"})
        conformance.prepare(
            runtime, conformance.skills.create("env-skill"), configs={"env-skill": config}
        )
        out = conformance.check_output(runtime, "printf '%s' \"$KIT_SKILL_VAR\"")
        assert out == "skill value ✓"

    def test_prepare_of_a_missing_source_directory_raises_prepare_error(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        missing = conformance.skills.skill_at(conformance.tmp_path / "no-such-skill", "ghost")
        with pytest.raises(SkillPrepareError):
            conformance.prepare(runtime, missing)
