"""The generated sync modules (scripts/generate_sync.py) match their async sources.

The sync face of each twin listed in a distribution's ``unasync.toml`` is generated from the
async module; this test fails when one was edited by hand or its source changed without
regenerating it, and checks the generator's marked regions and name replacement rules.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generate_sync.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_sync", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_sync", module)
    spec.loader.exec_module(module)
    return module


def test_every_generated_sync_module_matches_its_async_source() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("distribution", "generated"),
    [
        ("skillruntime-aio", {"client.py", "commands.py", "files.py", "runtime.py"}),
        ("skillruntime-opensandbox", {"commands.py", "files.py"}),
        (
            "skillruntime-core",
            {"exclusive.py", "spi.py", "scoped.py", "runtime_tools.py", "activator.py"},
        ),
    ],
)
def test_the_sync_modules_are_generated_and_say_so(distribution: str, generated: set[str]) -> None:
    generator = _generator()
    config = generator.load_config(ROOT / distribution / "unasync.toml")
    targets = {twin.target.name for twin in config.twins}
    assert generated <= targets
    for twin in config.twins:
        text = twin.target.read_text(encoding="utf-8")
        assert text.startswith(f"# Generated from {twin.source.name} by scripts/generate_sync.py")
        assert "async def" not in text
        assert "await self" not in text
        assert "# unasync:" not in text


def test_marked_regions_drop_async_lines_and_uncomment_sync_ones() -> None:
    generator = _generator()
    source = (
        "def f():\n"
        "    # unasync: async\n"
        "    return await g()\n"
        "    # unasync: sync\n"
        "    # return g()\n"
        "    # unasync: end\n"
        "x = 1\n"
    )
    assert generator.resolve_markers(source) == "def f():\n    return g()\nx = 1\n"


def test_a_bare_comment_line_of_a_sync_region_becomes_an_empty_line() -> None:
    """A sync-only docstring keeps its paragraph breaks without trailing whitespace."""
    generator = _generator()
    source = (
        "class C:\n"
        "    # unasync: async\n"
        '    """Async.\n'
        "\n"
        '    More."""\n'
        "    # unasync: sync\n"
        '    # """Sync.\n'
        "    #\n"
        '    # More."""\n'
        "    # unasync: end\n"
    )
    assert generator.resolve_markers(source) == 'class C:\n    """Sync.\n\n    More."""\n'


@pytest.mark.parametrize(
    "source",
    [
        "# unasync: async\nx = 1\n",  # never closed
        "# unasync: end\n",  # closes nothing
        "# unasync: async\n# unasync: async\n# unasync: end\n",  # nested
        "# unasync: sync\nx = 1\n# unasync: end\n",  # a sync-only line that is code
    ],
)
def test_malformed_regions_are_refused(source: str) -> None:
    generator = _generator()
    with pytest.raises(generator.MarkerError):
        generator.resolve_markers(source)


def test_names_are_replaced_as_tokens_and_dotted_names_as_one() -> None:
    generator = _generator()
    replacements = {"AsyncThing": "Thing", "httpx.AsyncClient": "httpx.Client", "aread": "read"}
    source = (
        '"""``AsyncThing`` over httpx.AsyncClient."""\n'
        "async def f(c: httpx.AsyncClient) -> AsyncThing:\n"
        "    await c.aread()  # AsyncThing reads\n"
        "    return my_AsyncThing\n"
    )
    assert generator.unasync_source(source, replacements) == (
        '"""``Thing`` over httpx.Client."""\n'
        "def f(c: httpx.Client) -> Thing:\n"
        "    c.read()  # Thing reads\n"
        "    return my_AsyncThing\n"
    )
