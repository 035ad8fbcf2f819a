"""Which tests are slow, by measurement: ``tests/durations.json`` and the tools that keep it true.

``make test-quick`` and the lowest-versions run leave out the tests marked ``slow``. Besides the
modules of :data:`SLOW_MODULES` and the tests marked where they are written,
every test that ``tests/durations.json`` lists is marked ``slow``: the file holds each test measured
at :data:`THRESHOLD_SECONDS` or more (its node id and seconds), so the quick set is the measured
fast part of every distribution's tests.

What is measured is a test's own cost: its setup, call and teardown, less the time spent starting
fixtures wider than a function (a module's double, the session's server), and less its teardown
when the next test of the process is in another module (or there is none), where wider fixtures
are stopped. Those are paid once per worker by whichever test happens to come first or last, so
counting them would mark a different test each run; a module whose shared fixture alone is slow
belongs in ``SLOW_MODULES`` instead.

Keeping the file true:

- ``pytest --record-durations=PATH`` (any selection, with or without xdist) adds each test's seconds
  to the JSON object in ``PATH`` (created if missing; a test run again is overwritten).
- ``python tests/slow_tests.py RUN...`` rewrites ``tests/durations.json`` from such records and/or
  pytest JUnit XML files (whose times include the shared fixtures): every test at the threshold or
  more. ``--add`` keeps the tests already listed (for a record of part of the suite).
- ``make durations`` runs the whole suite with ``--record-durations`` and then the line above.
- Every run prints, at its end, the tests that took the threshold or more without being marked
  ``slow`` (run ``make durations`` when the list grows).
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Generator, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

logger = logging.getLogger(__name__)

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DURATIONS_FILE = TESTS / "durations.json"
THRESHOLD_SECONDS = 0.5
"""A test measured at this many seconds or more is ``slow``.

Chosen so that ``make test-quick`` (4 workers on 2 cores) ends well within two minutes while every
folder of ``tests/`` keeps most of its tests in the quick set."""

_SHARED_PROPERTY = "shared_fixture_setup_seconds"

SLOW_MODULES = frozenset(
    {
        "agent_turn/test_turn_viking_real.py",
        "benchmarks/test_bench_quick.py",
        "conversations/test_async_exclusive_conversations.py",
        "conversations/test_exclusive_conversations.py",
        "core/test_preloaded_python.py",
        "deepagents/test_peer_suite.py",
        "docker/test_docker_deepagents_peer.py",
        "faults/test_opensandbox_faults.py",
        "faults/test_store_faults.py",
        "mcp/test_mcp_backends.py",
        "openai_agents/test_resume_process.py",
        "opensandbox/test_opensandbox_hangups.py",
        "opensandbox/test_opensandbox_multinode.py",
        "security/test_local_symlink_race.py",
        "viking_cli/test_viking_cli_real.py",
        "viking_real/test_viking_real_store.py",
        "viking_tools/test_viking_tools_real.py",
    }
)
"""Modules (relative to ``tests/``) whose every test is marked ``slow``."""


def load_slow_tests(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """The node ids (rootdir-relative, as pytest prints them) listed in ``path`` with their
    seconds; empty when the file is missing."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    tests: dict[str, float] = data["tests"]
    return tests


MEASURED_SECONDS = load_slow_tests()
"""The seconds of each test measured slow (``tests/durations.json``), by node id."""

SLOW_TESTS = frozenset(MEASURED_SECONDS)
"""Node ids measured slow (``tests/durations.json``)."""


def heaviest_modules_first(
    items: list[pytest.Item], seconds: Mapping[str, float] = MEASURED_SECONDS
) -> list[pytest.Item]:
    """``items`` with whole modules reordered by their measured seconds (the sum of their tests in
    ``seconds``), the heaviest first; the order inside a module, and of modules with equal sums
    (those with none measured, say), is kept.

    Under pytest-xdist's ``load`` distribution the tests are handed out in this order, so the long
    modules start while every worker is busy and the run does not end waiting for one worker on a
    long test collected last. Every worker computes the same order from the same file, as xdist
    requires; a module's fixtures still see its tests together.
    """
    weight: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        weight[module] = weight.get(module, 0.0) + seconds.get(item.nodeid, 0.0)
    return sorted(items, key=lambda item: -weight[item.nodeid.split("::", 1)[0]])


# ------------------------------------------------------------------------------ measuring


class DurationRecorder:
    """A pytest plugin: each test's own seconds, recorded and reported where reports arrive (the
    xdist controller, or the only process).

    In every process that runs tests it also times the setup of fixtures wider than a function and
    attaches that time to the test's setup report, which xdist carries to the controller.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._record_path: str | None = config.getoption("record_durations")
        self._seconds: dict[str, float] = {}
        self._unmarked: dict[str, float] = {}
        self._shared = 0.0
        self._depth = 0
        self._wide_teardown = False

    # ---- in the processes that run tests

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            return (yield)
        self._depth += 1
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._shared += time.perf_counter() - started

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        self._wide_teardown = nextitem is None or nextitem.path != item.path
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "setup":
            report.user_properties.append((_SHARED_PROPERTY, self._shared))
            self._shared = 0.0
        elif call.when == "teardown" and self._wide_teardown:
            report.user_properties.append((_SHARED_PROPERTY, report.duration))
        return report

    # ---- where the reports arrive

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(self._config, "workerinput"):
            return
        shared = dict(report.user_properties).get(_SHARED_PROPERTY, 0.0)
        seconds = max(0.0, report.duration - float(shared))  # type: ignore[arg-type]
        total = self._seconds.get(report.nodeid, 0.0) + seconds
        self._seconds[report.nodeid] = total
        slow = "slow" in report.keywords
        if report.when == "teardown" and total >= THRESHOLD_SECONDS and not slow:
            self._unmarked[report.nodeid] = total

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self._config, "workerinput") or not self._record_path:
            return
        path = Path(self._record_path)
        try:
            recorded: dict[str, float] = json.loads(path.read_text())
        except FileNotFoundError:
            recorded = {}
        recorded.update({nodeid: round(s, 3) for nodeid, s in self._seconds.items()})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(recorded, indent=0, sort_keys=True) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._unmarked:
            return
        terminalreporter.write_sep(
            "-",
            f"{len(self._unmarked)} tests took {THRESHOLD_SECONDS} s or more without being"
            " marked slow (make durations lists them in tests/durations.json)",
        )
        ranked = sorted(self._unmarked.items(), key=lambda pair: -pair[1])
        for nodeid, seconds in ranked[:10]:
            terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")


# ------------------------------------------------------------------------------ the file


def _nodeid_of_junit_case(classname: str, name: str) -> str | None:
    """``tests.aio.test_x.TestY`` + ``test_z[p]`` → ``tests/aio/test_x.py::TestY::test_z[p]``
    (the module is the longest dotted prefix that is a file)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
        if module.is_file():
            return "::".join([module.relative_to(ROOT).as_posix(), *parts[cut:], name])
    return None


def read_junit(path: Path) -> dict[str, float]:
    """Each test case's seconds in a pytest JUnit XML file (setup, call and teardown together)."""
    seconds: dict[str, float] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        nodeid = _nodeid_of_junit_case(case.get("classname", ""), case.get("name", ""))
        if nodeid is not None:
            seconds[nodeid] = seconds.get(nodeid, 0.0) + float(case.get("time") or 0.0)
    return seconds


def read_run(path: Path) -> dict[str, float]:
    """A ``--record-durations`` record or a JUnit XML file (by its first character)."""
    text = path.read_text()
    if text.lstrip().startswith("<"):
        return read_junit(path)
    recorded: dict[str, float] = json.loads(text)
    return recorded


def slow_set(seconds: Mapping[str, float], threshold: float) -> dict[str, float]:
    """The tests of ``seconds`` at ``threshold`` or more, by node id."""
    return {
        nodeid: round(value, 2) for nodeid, value in sorted(seconds.items()) if value >= threshold
    }


def write_durations(
    tests: Mapping[str, float], *, path: Path = DURATIONS_FILE, source: str
) -> None:
    """Write ``path``: the threshold, where the figures come from, and ``tests``."""
    data = {
        "about": (
            "Tests measured at threshold_seconds or more (setup + call + teardown, less shared"
            " fixtures); tests/conftest.py marks them slow. Rewrite with `make durations`."
        ),
        "threshold_seconds": THRESHOLD_SECONDS,
        "source": source,
        "tests": dict(sorted(tests.items())),
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


def defined_tests(module: Path) -> set[str]:
    """What ``module`` defines at its top level, by its syntax: each function's ``name``, each
    class's ``Class::`` (its test methods may be inherited, e.g. from the conformance kits) and
    ``Class::name`` of each method written in it."""
    tree = ast.parse(module.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(f"{node.name}::")
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}::{member.name}")
    return names


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """``tests/a/test_b.py::C::test_d[p]`` → (``tests/a/test_b.py``, ``C::test_d``)."""
    path, _, rest = nodeid.partition("::")
    return path, rest.partition("[")[0]


def main(argv: Iterable[str] | None = None) -> int:
    """``python tests/slow_tests.py [--add] RUN...``: rewrite ``tests/durations.json``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="--record-durations files or JUnit XML")
    parser.add_argument("--add", action="store_true", help="keep the tests already listed")
    parser.add_argument("--source", help="how the runs were made (default: their file names)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    seconds: dict[str, float] = {}
    for run in args.runs:
        seconds.update(read_run(run))
    tests = load_slow_tests() if args.add else {}
    tests.update(slow_set(seconds, THRESHOLD_SECONDS))
    write_durations(tests, source=args.source or ", ".join(run.name for run in args.runs))
    logger.info(
        "%s: %d of %d measured tests at %s s or more",
        DURATIONS_FILE.relative_to(ROOT),
        len(tests),
        len(seconds),
        THRESHOLD_SECONDS,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
