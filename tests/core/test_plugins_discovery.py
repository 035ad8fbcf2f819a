"""Entry-point discovery of real distributions, in a fresh virtual environment.

The fresh venv gets the core wheel built from this repository and, in the second test, a tiny
out-of-repo distribution that registers an ``echo-test`` runtime. Core's dependencies are made
importable from the development venv through a link directory that holds exactly their files, so
nothing else of this repository (no ``skillruntime-local``) is visible and nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "skillruntime-core"

ECHO_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "echo-test-runtime"
version = "0.0.1"
dependencies = ["skillruntime-core"]

[project.entry-points.skillruntime]
echo-test = "echo_test_runtime.plugin"

[tool.hatch.build.targets.wheel]
packages = ["echo_test_runtime"]
"""

ECHO_PLUGIN = """\
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.plugins.registry import RuntimeOptions, RuntimeProvider, hookimpl
from skillruntime.core.runtime.spi import SkillRuntime


class EchoOptions(RuntimeOptions):
    greeting: str = "hi"


class EchoRuntime(SkillRuntime):
    def __init__(self, options):
        self.greeting = options.greeting

    name = "echo-test"
    default_working_directory = "/"

    def prepare(self, request):
        return list(request.skills)

    def execute(self, request):
        return SkillExecutionResult(exit_code=3, stdout=f"{self.greeting}: {request.command}\\n")

    def get_file_system(self):
        raise NotImplementedError

    def close(self):
        pass


@hookimpl
def skillruntime_runtimes():
    return [RuntimeProvider("echo-test", "Echo test runtime", EchoOptions, EchoRuntime,
                            "echo-test-runtime")]
"""


def _requirement_names(requirements: list[str]) -> list[str]:
    names = []
    for requirement in requirements:
        if "extra ==" in requirement:
            continue
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        if match:
            names.append(match.group(0))
    return names


def _wheel_requirements(wheel: Path) -> list[str]:
    """``Requires-Dist`` of a built wheel (the source of truth, unlike a stale dev install)."""
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def _dependency_closure(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = _requirement_names(requirements)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        pending.extend(_requirement_names(dist.requires or []))
    return list(seen.values())


def _link_dependencies(core_wheel: Path, target: Path) -> None:
    """Symlink the top-level files of core's dependencies (and only those) into ``target``."""
    target.mkdir()
    for dist in _dependency_closure(_wheel_requirements(core_wheel)):
        for file in dist.files or []:
            top = file.parts[0]
            if top in {"..", "__pycache__"} or top.endswith(".pth"):
                continue
            source = Path(str(dist.locate_file(top)))
            link = target / top
            if source.exists() and not link.exists():
                link.symlink_to(source)


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of skillruntime-core and of the echo-test distribution, built offline."""
    root = tmp_path_factory.mktemp("discovery")
    echo = root / "echo-src"
    (echo / "echo_test_runtime").mkdir(parents=True)
    (echo / "pyproject.toml").write_text(ECHO_PYPROJECT)
    (echo / "echo_test_runtime" / "__init__.py").write_text("")
    (echo / "echo_test_runtime" / "plugin.py").write_text(ECHO_PLUGIN)
    wheels = root / "wheels"
    _pip(
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        str(wheels),
        str(CORE),
        str(echo),
    )
    [core_wheel] = wheels.glob("skillruntime_core-*.whl")
    _link_dependencies(core_wheel, root / "deps")
    return root


def _fresh_venv(wheelhouse: Path, tmp_path: Path, *wheel_prefixes: str) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "_skillruntime_test_deps.pth").write_text(str(wheelhouse / "deps") + "\n")
    wheels = [
        str(path)
        for prefix in wheel_prefixes
        for path in sorted((wheelhouse / "wheels").glob(f"{prefix}-*.whl"))
    ]
    assert len(wheels) == len(wheel_prefixes)
    _pip("--python", str(python), "install", "--no-deps", "--no-index", *wheels)
    return venv


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SKILLRUNTIME_"))}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        list(args), cwd=venv, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_with_only_core_installed_no_runtime_is_listed_and_local_says_what_to_install(
    wheelhouse: Path, tmp_path: Path
) -> None:
    venv = _fresh_venv(wheelhouse, tmp_path, "skillruntime_core")
    script = str(venv / "bin" / "skillruntime")

    listing = _run(venv, script, "runtimes", "--json")
    human = _run(venv, script, "runtimes")
    create = _run(
        venv,
        str(venv / "bin" / "python"),
        "-c",
        textwrap.dedent(
            """
            from skillruntime.core.errors import PluginNotFoundError
            from skillruntime.core.plugins.registry import create_runtime
            try:
                create_runtime("local")
            except PluginNotFoundError as error:
                print(error)
            """
        ),
    )
    exec_local = _run(venv, script, "exec", "--", "true")

    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == []
    assert "No runtimes installed" in human.stdout
    assert "pip install skillruntime-local" in create.stdout, create.stderr
    assert exec_local.returncode == 1
    assert "pip install skillruntime-local" in exec_local.stderr
    assert "Traceback" not in exec_local.stderr


def test_out_of_repo_distribution_is_discovered_through_its_entry_point(
    wheelhouse: Path, tmp_path: Path
) -> None:
    venv = _fresh_venv(wheelhouse, tmp_path, "skillruntime_core", "echo_test_runtime")
    script = str(venv / "bin" / "skillruntime")

    listing = _run(venv, script, "runtimes", "--json")
    executed = _run(
        venv, script, "exec", "--runtime", "echo-test", "-o", "greeting=yo", "--", "do", "it"
    )

    assert listing.returncode == 0, listing.stderr
    [provider] = json.loads(listing.stdout)
    assert provider["name"] == "echo-test"
    assert provider["distribution"] == "echo-test-runtime"
    assert provider["options"][0]["env_var"] == "SKILLRUNTIME_ECHO_TEST_GREETING"
    assert executed.stdout == "yo: do it\n", executed.stderr
    assert executed.returncode == 3
