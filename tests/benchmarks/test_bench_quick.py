"""Every benchmark of this folder runs in its quick mode, so a broken benchmark fails the build.

Only that each one runs and yields well-formed rows with finite ratios is asserted, never a
figure: speed is read from ``make bench``, not asserted in tests.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import run_benchmarks  # noqa: E402
from bench_common import Row  # noqa: E402

NAMES = run_benchmarks.benchmark_names()


def test_every_benchmark_module_is_discovered() -> None:
    on_disk = {path.stem for path in HERE.glob("bench_*.py")} - {"bench_common"}
    assert {f"bench_{name}" for name in NAMES} == on_disk
    assert "local" in NAMES


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_in_quick_mode(name: str) -> None:
    rows = run_benchmarks.load(name)(True)
    assert rows, f"bench_{name} produced no rows"
    for row in rows:
        assert isinstance(row, Row)
        assert row.name
        assert row.unit
        assert math.isfinite(row.value), row
        assert row.value >= 0, row
        assert math.isfinite(row.baseline), row
        assert row.baseline > 0, row
        assert math.isfinite(row.ratio), row


def test_row_ratio_and_target() -> None:
    row = Row("x", 3.0, 2.0, target=1.3)
    assert row.ratio == 1.5
    assert row.met is False
    assert Row("x", 1.0, 2.0, target=1.3).met is True
    assert Row("x", 1.0, 2.0).met is None
    assert Row("x", 0.0, 0.0).ratio == 0.0
    assert Row("x", 1.0, 0.0).ratio == math.inf
    assert Row("x", 1.0, 4.0, unit="MiB").as_dict()["ratio"] == 0.25


def test_table_has_one_line_per_row() -> None:
    rows = [("local", Row("a", 0.5e-3, 1e-3, target=1.0)), ("aio", Row("b", 2.0, 1.0, unit="B"))]
    text = run_benchmarks.table(rows).splitlines()
    assert len(text) == 3
    assert "0.500" in text[1]
    assert "ok" in text[1]
    assert "500.0 µs" in text[1]
    assert "2.000" in text[2]
    assert "2 B" in text[2]


def test_harness_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    def fake_run(quick: bool) -> list[Row]:
        calls.append(quick)
        return [Row("fake", 2.0, 4.0, target=1.0, note="half")]

    monkeypatch.setattr(run_benchmarks, "load", lambda name: fake_run)
    target = tmp_path / "out" / "results.json"
    assert run_benchmarks.main(["--quick", "--only", "a,b", "--json", str(target)]) == 0
    assert calls == [True, True]
    document = json.loads(target.read_text())
    assert document["quick"] is True
    assert [row["benchmark"] for row in document["rows"]] == ["a", "b"]
    assert document["rows"][0]["ratio"] == 0.5
    assert document["rows"][0]["met"] is True


def test_load_refuses_a_module_without_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bench_norun", type(sys)("bench_norun"))
    with pytest.raises(TypeError, match="run"):
        run_benchmarks.load("norun")
