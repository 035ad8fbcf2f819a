"""Setups a doc block can name with ``<!-- doc-setup: NAME -->`` (see test_doc_blocks.py).

Each is a fixture returning the names to define before the block runs; those that stand for a
server start the project's double (or the scripted model server) and set the environment
variables the block's client reads, so the block's own code stays what a reader would write.
The working directory is the test's temporary directory, holding a copy of ``examples/``.
"""

from __future__ import annotations

import os
import secrets
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from doubles.viking import VikingDouble
from doubles.viking.samples import demo_files
from doubles.viking_sessions import VikingSessionsDouble
from model_stub import StubModel
from skillruntime.core.skills import load_skill
from skillruntime.local import LocalSkillRuntime
from sql_databases import temporary_database

SKILL_MD = "---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nRun the script.\n"


@pytest.fixture
def local_runtime(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``runtime``: a local runtime with a work root; ``skill``: the example ``text-stats``."""
    with LocalSkillRuntime(work_root=tmp_path / "runtime") as runtime:
        yield {"runtime": runtime, "skill": load_skill(Path("examples/skills/text-stats"))}


@pytest.fixture
def skill_package() -> dict[str, Any]:
    """``pdf-1.4.0.zip`` in the working directory: a skill package named ``pdf``."""
    with zipfile.ZipFile("pdf-1.4.0.zip", "w") as archive:
        archive.writestr("SKILL.md", SKILL_MD.format(name="pdf", description="Fill PDF forms."))
        archive.writestr("scripts/fill.sh", "#!/bin/sh\necho filled\n")
    Path("skills/local-only").mkdir(parents=True)
    Path("skills/local-only/SKILL.md").write_text(
        SKILL_MD.format(name="local-only", description="A skill kept on this host."),
    )
    return {}


@pytest.fixture(scope="session")
def _opensandbox_server() -> Iterator[OpenSandboxDouble]:
    with OpenSandboxDouble() as double:
        yield double


@pytest.fixture
def opensandbox_double(
    _opensandbox_server: OpenSandboxDouble, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """An OpenSandbox double; ``OPEN_SANDBOX_DOMAIN``/``OPEN_SANDBOX_API_KEY`` point at it."""
    for name, value in _opensandbox_server.env().items():
        monkeypatch.setenv(name, value)
    return {}


@pytest.fixture
def viking_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """An OpenViking double holding alice's ``release-audit`` and ``pdf`` skills (accounts
    ``default`` and ``acme``); ``SKILLRUNTIME_VIKING_SERVER_URL`` points at it."""
    with VikingDouble() as double:
        for account in ("default", "acme"):
            for name in ("release-audit", "pdf"):
                files = demo_files()
                files["SKILL.md"] = SKILL_MD.format(
                    name=name, description=f"The {name} skill."
                ).encode()
                double.add_skill(
                    f"viking://user/alice/skills/{name}",
                    files,
                    account=account,
                    description=f"The {name} skill.",
                )
        monkeypatch.setenv("SKILLRUNTIME_VIKING_SERVER_URL", double.url)
        yield {}


@pytest.fixture
def viking_sessions_double() -> Iterator[dict[str, Any]]:
    """``sessions_url``: a double of OpenViking's session endpoints (on a real deployment the
    same server as the skills')."""
    with VikingSessionsDouble() as double:
        yield {"sessions_url": double.url}


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The scripted model server; the ``openai`` and ``anthropic`` clients' base URL and key
    variables point at it."""
    with StubModel() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield {}


def _package(root: Path, name: str, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for module, source in files.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(root))


_ECHO_RUNTIME = '''
    """A runtime that echoes commands back (the doc's example backend)."""
    from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
    from skillruntime.core.runtime.spi import BaseSkillRuntime


    class EchoRuntime(BaseSkillRuntime):
        def __init__(self, endpoint, api_key, timeout_seconds):
            super().__init__()
            self.endpoint = endpoint

        @property
        def name(self):
            return "echo"

        @property
        def default_working_directory(self):
            return "/"

        def _run(self, request, working_directory, environment):
            return SkillExecutionResult(exit_code=0, stdout=request.command + "\\n")

        def _raw_file_system(self):
            raise NotImplementedError
'''


@pytest.fixture
def echo_runtime_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The block is the module ``echo_runtime.plugin`` of an importable package whose
    ``echo_runtime.runtime`` holds ``EchoRuntime``."""
    _package(tmp_path / "packages", "echo_runtime", {"runtime": _ECHO_RUNTIME}, monkeypatch)
    return {"__name__": "echo_runtime.plugin", "__package__": "echo_runtime"}


_ACME_RUNTIME = '''
    """Stand-ins for the guide's Acme client and runtime (never contacted here)."""


    class AcmeClient:
        def __init__(self, url, api_key):
            self.url = url

        def close(self):
            pass


    class AcmeRuntime:
        def __init__(self, *, client, conversation_id, conversations_root, base_environment=None):
            self.client = client
'''


@pytest.fixture
def acme_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An importable ``acme_skillruntime`` package whose ``runtime`` module holds stand-ins for
    ``AcmeClient`` and ``AcmeRuntime``; the block runs as ``acme_skillruntime.plugin``."""
    _package(tmp_path / "packages", "acme_skillruntime", {"runtime": _ACME_RUNTIME}, monkeypatch)
    return {"__name__": "acme_skillruntime.plugin", "__package__": "acme_skillruntime"}


@pytest.fixture
def postgresql_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A throwaway database on the local PostgreSQL server; ``SKILLS_DB`` holds its URL."""
    with temporary_database("postgresql") as url:
        monkeypatch.setenv("SKILLS_DB", url)
        yield {}


@pytest.fixture
def mcp_http_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``skillruntime mcp serve --transport http`` (local runtime, ``examples/skills``) on a free
    port with a token: ``SKILLRUNTIME_MCP_URL`` and ``SKILLRUNTIME_MCP_TOKEN`` point at it, and this
    environment's ``bin`` directory is first on ``PATH`` (the ``skillruntime`` command)."""
    from mcp_http import http_server

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SKILLRUNTIME_MCP_TOKEN", secrets.token_urlsafe(16))
    args = ["mcp", "serve", "--runtime", "local", "--skills", "examples/skills"]
    with http_server(args) as server:
        monkeypatch.setenv("SKILLRUNTIME_MCP_URL", server.url)
        yield {}
