"""Remote OpenViking skills in the ``skill`` tool, against a real ``openviking`` server.

A remote skill is listed before use, downloaded and verified on its first invocation only,
prepared into the local runtime like a local skill, and runs with ``bash``; its
``allowed-tools`` and ``metadata.requires`` apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.tools.skill import SkillSource
from skillruntime.core.tools.toolset import SkillTools
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore, VikingStoreError
from skillruntime.viking.source import VikingSkillSource, viking_skill_sources
from viking_real.openviking_harness import Identity, OpenVikingServer, downloads

pytestmark = pytest.mark.timeout(1800)

IDENTITY = Identity(user="tools-user")

GREETER_MD = """---
name: remote-greeter
description: Greets a person by running a script of the skill.
allowed-tools: Bash(bash *) Read
metadata:
  requires:
    bins: [bash]
---

# Remote greeter

Run `bash scripts/greet.sh NAME` from this skill's base directory.
"""
GREET_SH = b'#!/bin/sh\nprintf "remote hello, %s\\n" "$1"\n'

NEEDY_MD = """---
name: remote-needy
description: Needs a program that is not installed.
metadata:
  requires:
    bins: [definitely-not-installed-skillruntime-bin]
---

Never runs.
"""


@pytest.fixture(scope="module")
def seeded(openviking_server: OpenVikingServer) -> OpenVikingServer:
    """The server with the tool-test skills of :data:`IDENTITY` installed."""
    server = openviking_server
    server.upload_skill(
        "remote-greeter",
        {"SKILL.md": GREETER_MD, "scripts/greet.sh": GREET_SH},
        identity=IDENTITY,
    )
    server.upload_skill("remote-needy", {"SKILL.md": NEEDY_MD}, identity=IDENTITY)
    return server


@pytest.fixture
def store(seeded: OpenVikingServer, tmp_path: Path) -> Iterator[VikingSkillStore]:
    with VikingSkillStore(
        server_url=seeded.url,
        account=IDENTITY.account,
        user=IDENTITY.user,
        cache_dir=tmp_path / "cache",
    ) as opened:
        yield opened


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalSkillRuntime]:
    with LocalSkillRuntime(
        work_root=tmp_path / "work", kill_grace_seconds=0.2, drain_seconds=0.2
    ) as opened:
        yield opened


def _uri(server: OpenVikingServer, name: str) -> str:
    return server.skill_uri(name, identity=IDENTITY)


def test_a_remote_skill_is_listed_then_prepared_on_first_use_and_runs_with_bash(
    seeded: OpenVikingServer,
    store: VikingSkillStore,
    runtime: LocalSkillRuntime,
    tmp_path: Path,
) -> None:
    uri = _uri(seeded, "remote-greeter")
    mark = seeded.proxy.mark()
    sources = viking_skill_sources(store, [uri])
    assert [s.name for s in sources] == ["remote-greeter"]
    assert isinstance(sources[0], SkillSource)
    with SkillTools(runtime, sources) as tools:
        listing = next(t for t in tools.tools if t.name == "skill").description
        assert "<name>remote-greeter</name>" in listing
        assert f"<location>{uri}</location>" in listing
        assert downloads(seeded.proxy.since(mark)) == []  # listed, nothing downloaded yet

        result = tools.dispatch("skill", {"command": "remote-greeter"})
        assert "Remote greeter" in result, result
        assert downloads(seeded.proxy.since(mark)), "the first use downloads the skill"
        prepared = tools.prepared_skill("remote-greeter")
        assert prepared is not None
        assert f"Base directory for this skill: {prepared.base_path}" in result
        # Prepared into the runtime's own work area, not run from the host cache.
        assert Path(prepared.base_path).is_relative_to(tmp_path / "work")
        assert (Path(prepared.base_path) / "scripts" / "greet.sh").read_bytes() == GREET_SH

        output = tools.dispatch(
            "bash", {"command": f"bash {prepared.base_path}/scripts/greet.sh Ada"}
        )
        assert "remote hello, Ada" in output, output

        # allowed-tools applies: only bash commands starting with "bash " and read remain.
        assert sorted(t.name for t in tools.tools) == ["bash", "read", "skill"]
        refused = tools.dispatch("write", {"file_path": "x.txt", "content": "no"})
        assert refused.startswith("Error:"), refused
        refused = tools.dispatch("bash", {"command": "echo not allowed"})
        assert refused.startswith("Error:"), refused

        mark = seeded.proxy.mark()
        again = tools.dispatch("skill", {"command": "remote-greeter"})
        assert "Remote greeter" in again
        assert seeded.proxy.since(mark) == []  # already prepared: no server call at all


def test_a_remote_skill_s_requirements_are_checked_in_the_runtime(
    seeded: OpenVikingServer, store: VikingSkillStore, runtime: LocalSkillRuntime
) -> None:
    sources = viking_skill_sources(store, [_uri(seeded, "remote-needy")])
    with SkillTools(runtime, sources) as tools:
        result = tools.dispatch("skill", {"command": "remote-needy"})
    assert result.startswith("Error:"), result
    assert "definitely-not-installed-skillruntime-bin" in result


def test_discovery_lists_the_identity_s_skills_without_downloading(
    seeded: OpenVikingServer, store: VikingSkillStore
) -> None:
    mark = seeded.proxy.mark()
    sources = viking_skill_sources(store, discover=f"viking://user/{IDENTITY.user}/skills")
    by_name = {s.name: s for s in sources}
    assert {"remote-greeter", "remote-needy"} <= set(by_name)
    assert by_name["remote-greeter"].location == _uri(seeded, "remote-greeter")
    assert "Greets a person" in by_name["remote-greeter"].description
    assert downloads(seeded.proxy.since(mark)) == []


def test_a_lazy_source_makes_no_server_call_until_its_description_or_skill_is_needed(
    seeded: OpenVikingServer, store: VikingSkillStore, runtime: LocalSkillRuntime
) -> None:
    uri = _uri(seeded, "remote-greeter")
    mark = seeded.proxy.mark()
    (source,) = viking_skill_sources(store, [uri], resolve=False)
    assert source.name == "remote-greeter"
    assert seeded.proxy.since(mark) == []
    assert "Greets a person" in source.description
    assert seeded.proxy.since(mark), "the description was resolved through the server"
    with SkillTools(runtime, [source]) as tools:
        assert "Remote greeter" in tools.dispatch("skill", {"command": "remote-greeter"})
        assert source.directory is not None
        leased = [e for e in store.cache_entries() if e.root_uri == uri]
        assert [e.leased for e in leased] == [True]
    # Closing the tools closed the source and released its lease.
    assert source.directory is None
    assert [e.leased for e in store.cache_entries() if e.root_uri == uri] == [False]


def test_a_missing_remote_skill_is_an_error_result_and_holds_nothing(
    seeded: OpenVikingServer, store: VikingSkillStore, runtime: LocalSkillRuntime
) -> None:
    uri = _uri(seeded, "remote-missing")
    with pytest.raises(VikingStoreError) as caught:
        viking_skill_sources(store, [uri])
    assert caught.value.code == "SKILL_NOT_FOUND"
    source = VikingSkillSource(store, uri, description="Not there.")
    with SkillTools(runtime, [source]) as tools:
        result = tools.dispatch("skill", {"command": "remote-missing"})
    assert result.startswith("Error:"), result
    assert "SKILL_NOT_FOUND" in result
    assert source.directory is None


def test_a_skill_md_naming_another_skill_is_refused(
    seeded: OpenVikingServer, store: VikingSkillStore
) -> None:
    source = VikingSkillSource(
        store, _uri(seeded, "remote-greeter"), name="other-name", description="Wrong name."
    )
    with pytest.raises(ValueError, match="remote-greeter"):
        source.load()
    assert source.directory is None
    assert all(not e.leased for e in store.cache_entries())
