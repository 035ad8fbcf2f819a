"""Per-call overhead of the deepagents backend against the same call on the runtime directly.

    .venv/bin/python tests/benchmarks/bench_deepagents.py [--runs 200]

Measured in one run, calls interleaved, medians compared:

1. **Local runtime.** ``SkillRuntimeBackend.execute("true")`` against
   ``LocalSkillRuntime.execute`` of the same request; a 1 MiB file read with
   ``download_files`` against ``get_file_system().read_bytes``; and a ``read`` page
   (2000 lines of the same file) against ``read_text`` of the whole file. Target ratio <= 1.1.
2. **OpenSandbox double.** The same three pairs through the OpenSandbox runtime (real SDK,
   protocol double), plus the third-party ``deepagents-opensandbox`` backend on the same sandbox
   (its ``execute`` and ``download_files``; its ``read`` is deepagents' python-over-``execute``
   script) — reported only, and ``n/a`` when that package is not installed (it is not a
   dependency of this project).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.deepagents import SkillRuntimeBackend
from skillruntime.local import LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime

MIB = 1024 * 1024
LINE = "0123456789abcdef" * 4 + "\n"  # 65 bytes


def _median(function: Callable[[], Any], samples: list[float]) -> None:
    start = time.perf_counter()
    function()
    samples.append(time.perf_counter() - start)


def compare(
    runs: int, ours: Callable[[], Any], base: Callable[[], Any], other: Callable[[], Any] | None
) -> tuple[float, float, float | None]:
    """Interleaved medians of ``ours``, ``base`` and ``other`` (after 5 warm-up calls each)."""
    for _ in range(5):
        ours()
        base()
        if other is not None:
            other()
    a: list[float] = []
    b: list[float] = []
    c: list[float] = []
    for _ in range(runs):
        _median(ours, a)
        _median(base, b)
        if other is not None:
            _median(other, c)
    return statistics.median(a), statistics.median(b), statistics.median(c) if c else None


def measure(
    label: str, runtime: SkillRuntime, path: str, runs: int, third_party: Any | None
) -> list[Row]:
    """The rows of one backend; each pair is also printed (with the third-party figure)."""
    backend = SkillRuntimeBackend(runtime)
    fs = runtime.get_file_system()
    fs.write_text(path, LINE * (MIB // len(LINE) + 1))
    request = SkillExecutionRequest(command="true")
    pairs: list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[], Any] | None]] = [
        (
            'execute("true")',
            lambda: backend.execute("true"),
            lambda: runtime.execute(request),
            (lambda: third_party.execute("true")) if third_party else None,
        ),
        (
            "1 MiB download",
            lambda: backend.download_files([path]),
            lambda: fs.read_bytes(path),
            (lambda: third_party.download_files([path])) if third_party else None,
        ),
        (
            "read page",
            lambda: backend.read(path),
            lambda: fs.read_text(path),
            (lambda: third_party.read(path)) if third_party else None,
        ),
    ]
    rows: list[Row] = []
    for name, ours, base, other in pairs:
        adapter, direct, theirs = compare(runs, ours, base, other)
        target = None if name == "read page" else 1.1
        rows.append(Row(f"{label}: {name}", adapter, direct, target=target, note="the runtime"))
        if theirs is not None:
            rows.append(
                Row(f"{label}: {name}, deepagents-opensandbox", theirs, direct, note="the runtime")
            )
        extra = (
            f", deepagents-opensandbox {theirs * 1e3:8.3f} ms ({theirs / direct:5.2f}x)"
            if theirs is not None
            else (", deepagents-opensandbox n/a" if label == "opensandbox" else "")
        )
        print(
            f"{label:11} {name:16}: adapter {adapter * 1e3:8.3f} ms, "
            f"runtime {direct * 1e3:8.3f} ms, ratio {adapter / direct:5.2f}x{extra}"
        )
    return rows


def third_party_backend(double: OpenSandboxDouble, runtime: OpenSandboxSkillRuntime) -> Any:
    """The ``deepagents-opensandbox`` backend on the runtime's sandbox, or ``None``."""
    try:
        module = importlib.import_module("deepagents_opensandbox")
    except ImportError:
        return None
    from datetime import timedelta

    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.sync.sandbox import SandboxSync

    config = ConnectionConfigSync(
        domain=double.domain, api_key=double.api_key, request_timeout=timedelta(seconds=30)
    )
    assert runtime.sandbox_id is not None
    sandbox = SandboxSync.connect(runtime.sandbox_id, connection_config=config)
    return module.OpensandboxBackend(sandbox=sandbox)


def measure_all(runs: int) -> list[Row]:
    """Every row: the local runtime, then the OpenSandbox double."""
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory() as root,
        LocalSkillRuntime(conversation_id="bench", conversations_root=root) as local,
    ):
        rows += measure("local", local, f"{local.default_working_directory}/big.txt", runs, None)
    with OpenSandboxDouble() as double:
        runtime = OpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id="bench",
            conversation_store=InMemoryConversationStore(),
        )
        try:
            runtime.execute(SkillExecutionRequest(command="true"))  # creates the sandbox
            other = third_party_backend(double, runtime)
            rows += measure(
                "opensandbox",
                runtime,
                f"{runtime.default_working_directory}/big.txt",
                max(3, runs // 4),
                other,
            )
        finally:
            with contextlib.suppress(Exception):
                runtime.destroy_conversation_sandbox()
            runtime.close()
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    return measure_all(5 if quick else 200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    measure_all(options.runs)


if __name__ == "__main__":
    main()
