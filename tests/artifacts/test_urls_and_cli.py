"""Stores built from URLs through the plugin hook, and the ``artifacts`` CLI group."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from artifact_helpers import good_zip
from click.testing import CliRunner

from moto_s3 import s3_options
from skillruntime.core.artifacts import (
    ObjectSkillArtifactStore,
    ZipSkillArtifactStore,
    open_artifact_store,
    url_scheme,
)
from skillruntime.core.artifacts.cli import artifacts_group
from skillruntime.core.errors import PluginNotFoundError
from skillruntime.core.plugins.registry import available_artifact_stores

pytestmark = pytest.mark.usefixtures("builtin_stores")


def test_schemes_of_urls_and_paths() -> None:
    assert url_scheme("/srv/skills") == "file"
    assert url_scheme("relative/dir") == "file"
    assert url_scheme("C:\\skills") == "file"
    assert url_scheme("file:///srv/skills") == "file"
    assert url_scheme("S3://bucket/p") == "s3"
    assert url_scheme("objectstore+file:///srv") == "objectstore+file"


def test_builtin_providers_are_registered() -> None:
    providers = available_artifact_stores()
    for scheme in ("file", "objectstore", "s3", "gs", "az", "memory"):
        assert providers[scheme].distribution == "skillruntime-core"


def test_paths_and_file_urls_give_the_zip_store(tmp_path: Path) -> None:
    by_path = open_artifact_store(str(tmp_path / "a"))
    by_url = open_artifact_store(f"file://{tmp_path / 'b'}")
    assert isinstance(by_path, ZipSkillArtifactStore)
    assert by_path.root == tmp_path / "a"
    assert isinstance(by_url, ZipSkillArtifactStore)
    assert by_url.root == tmp_path / "b"


def test_fsspec_urls_give_the_object_store(tmp_path: Path) -> None:
    memory = open_artifact_store(f"memory://u-{uuid.uuid4().hex}/p", cache_dir=tmp_path / "c")
    assert isinstance(memory, ObjectSkillArtifactStore)
    assert memory.cache_dir == tmp_path / "c"
    local = open_artifact_store(f"objectstore+file://{tmp_path}/objects", cache_dir=tmp_path / "c")
    assert isinstance(local, ObjectSkillArtifactStore)
    assert local.base == f"{tmp_path}/objects"


def test_s3_url_with_fsspec_options(moto_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    store = open_artifact_store(
        f"s3://{s3_bucket}/skills", cache_dir=tmp_path, **s3_options(moto_endpoint)
    )
    assert isinstance(store, ObjectSkillArtifactStore)
    assert store.list_artifacts() == []


def test_unknown_scheme_lists_the_installed_ones() -> None:
    with pytest.raises(PluginNotFoundError, match=r"'nope'.*installed schemes: .*file"):
        open_artifact_store("nope://x")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(artifacts_group, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_install_ls_materialize_rm_on_the_zip_store(tmp_path: Path) -> None:
    package = tmp_path / "pdf.zip"
    package.write_bytes(good_zip())
    store = str(tmp_path / "store")
    code, output = _run("install", store, str(package), "--version", "1.0.0")
    assert code == 0, output
    installed = json.loads(output)
    assert installed["name"] == "pdf"
    assert installed["digest"].startswith("sha256:")

    code, output = _run("ls", store, "--json")
    assert [json.loads(line) for line in output.splitlines()] == [installed]
    code, output = _run("ls", store)
    assert output.split("\t")[:3] == ["pdf", "1.0.0", installed["digest"]]

    code, output = _run("materialize", store, "pdf", "1.0.0")
    assert code == 0
    assert (Path(output.strip()) / "SKILL.md").is_file()
    dest = tmp_path / "copy"
    code, output = _run("materialize", store, "pdf", "1.0.0", "--dest", str(dest))
    assert code == 0
    assert (dest / "scripts" / "run.py").read_bytes() == b"print('hi')\n"

    code, output = _run("install", store, str(package), "--version", "1.0.0")
    assert code == 1
    assert "already installed" in output

    code, output = _run("rm", store, "pdf", "1.0.0")
    assert code == 0
    assert "deleted pdf@1.0.0" in output
    code, output = _run("rm", store, "pdf", "1.0.0")
    assert code == 0
    assert "not installed" in output
    assert _run("ls", store)[1] == ""


def test_cli_on_an_object_store_with_options(tmp_path: Path) -> None:
    package = tmp_path / "pdf.zip"
    package.write_bytes(good_zip())
    url = f"objectstore+file://{tmp_path}/objects"
    cache = f"cache_dir={tmp_path / 'cache'}"
    code, output = _run("install", url, str(package), "--version", "2", "-o", cache)
    assert code == 0, output
    code, output = _run("materialize", url, "pdf", "2", "-o", cache)
    assert code == 0
    assert Path(output.strip()).is_relative_to(tmp_path / "cache")
    code, output = _run("rm", url, "pdf", "2", "-o", cache)
    assert code == 0
    assert "deleted" in output


def test_cli_reports_refusals_without_a_traceback(tmp_path: Path) -> None:
    package = tmp_path / "bad.zip"
    package.write_bytes(good_zip())
    code, output = _run(
        "install", str(tmp_path / "s"), str(package), "--version", "1", "--name", "docx"
    )
    assert code == 1
    assert "NAME_MISMATCH" in output
    code, output = _run(
        "install", str(tmp_path / "s"), str(package), "--version", "1", "--digest", "nothex"
    )
    assert code == 2  # a usage error
    assert "digest" in output
    assert "nothex" not in output
    code, output = _run("materialize", str(tmp_path / "s"), "pdf", "1")
    assert code == 1
    assert "not installed" in output
    code, output = _run("ls", str(tmp_path / "s"), "-o", "bogus")
    assert code != 0
    assert "KEY=VALUE" in output
