"""The generated sync modules (scripts/generate_sync.py) match their async sources.

The sync face of each twin listed in a distribution's ``unasync.toml`` is generated from the
async module; this test fails when one was edited by hand or its source changed without
regenerating it, and checks the generator's marked regions (``if True:  # unasync: async`` /
``else:  # unasync: sync``, real code in both branches) and name replacement rules.
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
            {
                "exclusive.py",
                "spi.py",
                "scoped.py",
                "runtime_tools.py",
                "activator.py",
                "workspace.py",
                "durable.py",
            },
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


def test_a_marked_if_keeps_its_sync_branch_dedented() -> None:
    generator = _generator()
    source = (
        "async def f():\n"
        "    if True:  # unasync: async\n"
        "        return await g()\n"
        "    else:  # unasync: sync\n"
        "        # the sync face\n"
        "        return g()\n"
        "x = 1\n"
    )
    assert generator.resolve_markers(source) == (
        "async def f():\n    # the sync face\n    return g()\nx = 1\n"
    )


def test_an_async_only_region_is_dropped_and_a_sync_only_one_kept() -> None:
    generator = _generator()
    source = (
        "if False:  # unasync: sync\n"
        "    import threading\n"
        "class C:\n"
        "    if True:  # unasync: async  # noqa: SIM108\n"
        "        async def close(self):\n"
        "            pass\n"
        "\n"
        "    def run(self):\n"
        "        pass\n"
    )
    assert generator.resolve_markers(source) == (
        "import threading\nclass C:\n\n    def run(self):\n        pass\n"
    )


def test_both_variants_of_a_method_are_real_code() -> None:
    """A decorator or a signature that differs: the method is defined in each branch."""
    generator = _generator()
    source = (
        "class C:\n"
        "    if True:  # unasync: async\n"
        "\n"
        "        async def mode(self) -> str:\n"
        "            return await self._detect()\n"
        "\n"
        "    else:  # unasync: sync\n"
        "\n"
        "        @property\n"
        "        def mode(self) -> str:\n"
        "            return self._detect()\n"
    )
    assert generator.resolve_markers(source) == (
        "class C:\n\n    @property\n    def mode(self) -> str:\n        return self._detect()\n"
    )


def test_a_sync_docstring_replaces_the_docstring_it_follows() -> None:
    generator = _generator()
    source = (
        '"""Async module."""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "if False:  # unasync: sync docstring\n"
        '    """Sync module.\n'
        "\n"
        '    More."""\n'
        "\n"
        "import os\n"
        "\n"
        "\n"
        "def f():\n"
        '    """Async f."""\n'
        "    if False:  # unasync: sync docstring\n"
        '        """Sync f."""\n'
        "    return os.sep\n"
    )
    assert generator.resolve_markers(source) == (
        '"""Sync module.\n'
        "\n"
        'More."""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "import os\n"
        "\n"
        "\n"
        "def f():\n"
        '    """Sync f."""\n'
        "    return os.sep\n"
    )


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\n# unasync: async\ny = 2\n# unasync: sync\n# y = 3\n# unasync: end\n",
        "def f():\n    # unasync: sync\n    # return 1\n    # unasync: end\n    pass\n",
        "# unasync: end\n",
    ],
)
def test_the_old_comment_form_is_refused(source: str) -> None:
    generator = _generator()
    with pytest.raises(generator.MarkerError, match="old comment form"):
        generator.resolve_markers(source)


@pytest.mark.parametrize(
    "source",
    [
        "if True:  # unasync: async\n    x = 1\nelse:\n    x = 2\n",  # else not marked
        "if True:\n    x = 1\nelse:  # unasync: sync\n    x = 2\n",  # if not marked
        "if x:  # unasync: async\n    y = 1\n",  # not 'if True:'
        "if True:  # unasync: sync\n    y = 1\n",  # the sync marker on the async branch
        "if False:  # unasync: sync\n    y = 1\nelse:\n    y = 2\n",  # sync-only with else
        "if True:  # unasync: async\n    x = 1\nelif y:\n    x = 2\n",  # an elif
        "if True:  # unasync: async\n"  # nested
        "    if True:  # unasync: async\n        x = 1\n",
        "x = 1  # unasync: async\n",  # a marker on no if
        "if True:  # unasync: maybe\n    x = 1\n",  # an unknown marker
        "if True:  # unasync: async\n    x = (\n",  # does not parse
        "async def f():\n    if True:  # unasync: async\n        pass\n"
        "    else:  # unasync: sync\n        yield from g()\n",  # parses, does not compile
        '"""Doc."""\nx = 1\nif False:  # unasync: sync docstring\n    """Sync."""\n',
        "def f():\n    if False:  # unasync: sync docstring\n        x = 1\n",
    ],
)
def test_malformed_regions_are_refused(source: str) -> None:
    generator = _generator()
    with pytest.raises(generator.MarkerError):
        generator.resolve_markers(source)


def test_no_source_hides_code_in_comments() -> None:
    """Every line of every async source is parsed: no marker comment stands on its own line."""
    generator = _generator()
    for config_path in sorted(ROOT.glob("*/unasync.toml")):
        for twin in generator.load_config(config_path).twins:
            text = twin.source.read_text(encoding="utf-8")
            generator.resolve_markers(text)  # refuses the old comment form
            assert "# unasync: end" not in text, twin.source


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
