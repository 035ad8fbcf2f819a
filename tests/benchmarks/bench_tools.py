"""The ``read``, ``write`` and ``edit`` tools on the local runtime against the file system.

    .venv/bin/python tests/benchmarks/bench_tools.py [--runs 2000] [--lines 500]

Each tool call goes through ``SkillTools.dispatch`` (argument validation, path scoping and
confinement, formatting of the answer included) on a conversation workspace, against the
floor, plain Python file calls on the same file in the same directory:

* ``read`` of a ``--lines``-line text file against ``open(path).read()``, and against that
  read plus the numbering of every line with one ``str.format`` each (the least a numbered
  answer costs in plain Python);
* ``read`` also against the least a numbered answer costs with the tool's own technique:
  ``open().read()``, ``str.split`` and one ``%`` of a prebuilt template of numbered lines;
* ``write`` of that content against ``open(path, "w").write(content)``, and against the least
  an atomic replacement costs (``os.open`` of a new temporary file, ``write``, ``fchmod``,
  ``close``, ``rename`` over the target), which the tool's writes are;
* ``edit`` replacing one line in the middle against ``open().read()``, ``str.replace`` and
  ``open(path, "w").write()``.

When ``deepagents`` is installed, the same calls through its ``FilesystemMiddleware`` tools
(``read_file``, ``write_file``, ``edit_file`` over ``FilesystemBackend``) are measured beside
them, and our call is also given as a ratio against theirs; without it those rows are left
out. Calls are interleaved (floor, ours, peer) and medians compared; the workspace is on tmpfs
and on the disk of the temporary directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import Row, default_scratch

from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime

Call = Callable[[], object]


def _content(lines: int, tag: str = "") -> str:
    return "".join(
        f"    value_{index:05d} = compute(alpha, beta, gamma)  # line {index}{tag}\n"
        for index in range(lines)
    )


def _deepagents_tools(root: Path) -> dict[str, Callable[..., Any]] | None:
    """The sync functions of deepagents' file tools on ``root``, or ``None`` without it."""
    if importlib.util.find_spec("deepagents") is None:
        return None
    from deepagents.backends.filesystem import FilesystemBackend
    from deepagents.middleware.filesystem import FilesystemMiddleware

    middleware = FilesystemMiddleware(backend=FilesystemBackend(root_dir=root, virtual_mode=True))
    return {tool.name: tool.func for tool in middleware.tools if tool.func is not None}


def _medians(calls: dict[str, Call], runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(max(5, runs // 20)):  # warm-up
        for call in calls.values():
            call()
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def measure(directory: str | None, runs: int, lines: int) -> dict[str, dict[str, float]]:
    """Median seconds per tool: ``floor``, ``ours`` and (with deepagents) ``peer``."""
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tools-", dir=directory) as scratch:
        root = Path(scratch)
        content = _content(lines)
        middle = f"    value_{lines // 2:05d} = compute(alpha, beta, gamma)  # line {lines // 2}\n"
        changed = middle.replace("compute", "recompute")
        with LocalSkillRuntime(conversation_id="bench", conversations_root=root / "c") as runtime:
            workspace = Path(runtime.default_working_directory)
            runtime.get_file_system().write_text("ours.py", content)
            tools = SkillTools(runtime)
            floor_path = workspace / "floor.py"
            floor_path.write_text(content)
            peer_root = root / "peer"
            peer_root.mkdir()
            (peer_root / "peer.py").write_text(content)
            peer = _deepagents_tools(peer_root)
            context = SimpleNamespace(tool_call_id="call-1", state={})

            template = "".join(f"{number:6d}\t%s\n" for number in range(1, lines + 1))
            temporary = str(workspace / ".floor.tmp")
            data = content.encode()

            def split_floor() -> str:
                text = floor_path.read_text().split("\n")
                text.pop()
                return template % tuple(text)

            def atomic_floor() -> None:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                os.write(fd, data)
                os.fchmod(fd, 0o644)
                os.close(fd)
                os.rename(temporary, floor_path)

            def floor_edit() -> None:
                text = floor_path.read_text()
                floor_path.write_text(text.replace(middle, changed, 1))
                floor_path.write_text(text)

            def ours_edit() -> None:
                tools.dispatch(
                    "edit", {"file_path": "ours.py", "old_string": middle, "new_string": changed}
                )
                tools.dispatch(
                    "edit", {"file_path": "ours.py", "old_string": changed, "new_string": middle}
                )

            suites: dict[str, dict[str, Call]] = {
                "read": {
                    "floor": floor_path.read_text,
                    "numbered": lambda: "".join(
                        map(
                            "{:6d}\t{}\n".format,
                            itertools.count(1),
                            floor_path.read_text().splitlines(),
                        )
                    ),
                    "split": split_floor,
                    "ours": lambda: tools.dispatch("read", {"file_path": "ours.py"}),
                },
                "write": {
                    "floor": lambda: floor_path.write_text(content),
                    "atomic": atomic_floor,
                    "ours": lambda: tools.dispatch(
                        "write", {"file_path": "ours.py", "content": content}
                    ),
                },
                "edit": {"floor": floor_edit, "ours": ours_edit},
            }
            if peer is not None:
                read_file, write_file, edit_file = (
                    peer["read_file"],
                    peer["write_file"],
                    peer["edit_file"],
                )

                def peer_edit() -> None:
                    edit_file(
                        file_path="/peer.py", old_string=middle, new_string=changed, runtime=context
                    )
                    edit_file(
                        file_path="/peer.py", old_string=changed, new_string=middle, runtime=context
                    )

                suites["read"]["peer"] = lambda: read_file(file_path="/peer.py", runtime=context)
                suites["write"]["peer"] = lambda: write_file(
                    file_path="/peer.py", content=content, runtime=context
                )
                suites["edit"]["peer"] = peer_edit
            check = tools.dispatch("read", {"file_path": "ours.py"})
            if f"Showing lines 1-{min(lines, 2000)} of {lines}" not in check:
                raise RuntimeError(f"unexpected read answer: {check[:200]!r}")
            for tool, calls in suites.items():
                results[tool] = _medians(calls, runs)
    return results


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    runs, lines = (20, 50) if quick else (2000, 500)
    rows: list[Row] = []
    for label, directory in (("tmpfs", default_scratch()), ("disk", tempfile.gettempdir())):
        if directory is None:
            continue
        for tool, figures in measure(directory, runs, lines).items():
            what = f"{tool} tool, {lines} lines, {label}"
            floor = {"read": "open().read()", "write": 'open("w").write()'}.get(
                tool, "read + replace + write, twice"
            )
            rows.append(Row(what, figures["ours"], figures["floor"], target=1.5, note=floor))
            if "numbered" in figures:
                rows.append(
                    Row(
                        what,
                        figures["ours"],
                        figures["numbered"],
                        note="open().read() + one str.format per line",
                    )
                )
            if "split" in figures:
                rows.append(
                    Row(
                        what,
                        figures["ours"],
                        figures["split"],
                        note="open().read() + split + one % of a numbered template",
                    )
                )
            if "atomic" in figures:
                rows.append(
                    Row(
                        what,
                        figures["ours"],
                        figures["atomic"],
                        note="os-level atomic replace (new file, write, fchmod, rename)",
                    )
                )
            if "peer" in figures:
                rows.append(
                    Row(
                        what,
                        figures["ours"],
                        figures["peer"],
                        target=1.0,
                        note="deepagents' tool call",
                    )
                )
                rows.append(
                    Row(
                        f"deepagents {tool}, {lines} lines, {label}",
                        figures["peer"],
                        figures["floor"],
                        note=floor,
                    )
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--dir", default=default_scratch())
    args = parser.parse_args()
    for tool, figures in measure(args.dir, args.runs, args.lines).items():
        text = ", ".join(f"{name} {seconds * 1e6:.1f} us" for name, seconds in figures.items())
        ratios = ", ".join(
            f"ours/{name} {figures['ours'] / seconds:.2f}"
            for name, seconds in figures.items()
            if name != "ours"
        )
        print(f"{tool:5}: {text}; {ratios}")


if __name__ == "__main__":
    main()
