"""The example skills under examples/skills: valid in strict mode, and their scripts really work."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from skillruntime.core.models import BootstrapCommand
from skillruntime.core.skills import (
    discover_skills,
    load_skill,
    skill_bootstrap_commands,
    validate_skill_directory,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


def copy_skill(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("build"))
    return target


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


# ---------------------------------------------------------------------- validity


def test_examples_are_discovered_in_strict_mode_without_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="skillruntime.core.skills"):
        skills = discover_skills(EXAMPLES, strict=True)
    assert [s.name for s in skills] == ["csv-report", "text-stats"]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    for skill in skills:
        assert validate_skill_directory(skill.base_path) == []
        assert skill.base_path == str(EXAMPLES / skill.name)


@pytest.mark.parametrize(
    ("skill", "script", "shebang"),
    [
        ("csv-report", "scripts/report.py", "#!/usr/bin/env python3"),
        ("text-stats", "scripts/run.sh", "#!/bin/sh"),
        ("text-stats", "scripts/setup.sh", "#!/bin/sh"),
    ],
)
def test_example_scripts_are_executable_with_a_shebang(
    skill: str, script: str, shebang: str
) -> None:
    path = EXAMPLES / skill / script
    assert os.access(path, os.X_OK)
    assert path.read_text(encoding="utf-8").splitlines()[0] == shebang


def test_text_stats_declares_its_bootstrap_and_requirements() -> None:
    skill = load_skill(EXAMPLES / "text-stats", strict=True)
    assert skill is not None
    assert skill_bootstrap_commands(skill) == (BootstrapCommand(command="sh scripts/setup.sh"),)
    assert skill.metadata["requires"]["bins"] == ["sh", "awk", "sed", "sort", "tr"]
    csv_skill = load_skill(EXAMPLES / "csv-report", strict=True)
    assert csv_skill is not None
    assert skill_bootstrap_commands(csv_skill) == ()
    assert csv_skill.metadata["requires"]["bins"] == ["python3"]


# -------------------------------------------------------------------------- csv-report


def test_csv_report_writes_markdown_and_html_for_the_sample(tmp_path: Path) -> None:
    skill = copy_skill("csv-report", tmp_path)
    out = tmp_path / "out" / "reports"
    result = run(["./scripts/report.py", "assets/sample.csv", str(out)], cwd=skill)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(out / "report.md"), str(out / "report.html")]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Report: sample.csv\n")
    assert "12 rows, 6 columns" in markdown
    # units: 11 values (one empty), 1..20, mean 79/11
    assert "| units | numeric | 11 | 1 | 10 | 1 | 20 | 7.1818 |" in markdown
    assert "| region | text | 12 | 0 | 4 |  |  |  |" in markdown
    assert "- `Widget`: 5" in markdown
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "<td>units</td><td>numeric</td><td>11</td><td>1</td>" in page
    assert "<li><code>North</code>: 4</li>" in page


def test_csv_report_escapes_markup_and_handles_options(tmp_path: Path) -> None:
    skill = copy_skill("csv-report", tmp_path)
    data = tmp_path / "data.csv"
    data.write_text("label;score\n<script>x</script>;1.5\na|b;n/a\na|b;-2\n", encoding="utf-8")
    result = run(
        [
            "./scripts/report.py",
            "--delimiter",
            ";",
            "--top",
            "2",
            "--title",
            "T<1>",
            str(data),
            str(tmp_path / "o"),
        ],
        cwd=skill,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in page
    assert "<li><code>&lt;script&gt;x&lt;/script&gt;</code>: 1</li>" in page
    assert "<title>T&lt;1&gt;</title>" in page
    markdown = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "| score | mixed | 3 | 0 | 3 | -2 | 1.5 | -0.25 |" in markdown
    assert "- `a|b`: 2" in markdown
    assert "## Top 2 values per column" in markdown


def test_csv_report_fails_clearly_on_a_missing_or_empty_file(tmp_path: Path) -> None:
    skill = copy_skill("csv-report", tmp_path)
    missing = run(["./scripts/report.py", str(tmp_path / "none.csv"), "out"], cwd=skill)
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    result = run(["./scripts/report.py", str(empty), "out"], cwd=skill)
    assert result.returncode == 2
    assert "no header row" in result.stderr
    assert not (skill / "out").exists()


# -------------------------------------------------------------------------- text-stats


def test_text_stats_refuses_to_run_before_its_bootstrap(tmp_path: Path) -> None:
    skill = copy_skill("text-stats", tmp_path)
    result = run(["./scripts/run.sh", "assets/sample.txt"], cwd=skill)
    assert result.returncode == 3
    assert "not bootstrapped" in result.stderr
    assert "sh scripts/setup.sh" in result.stderr
    assert result.stdout == ""


def bootstrap(skill_dir: Path) -> None:
    skill = load_skill(skill_dir, strict=True)
    assert skill is not None
    for command in skill_bootstrap_commands(skill):
        result = subprocess.run(
            ["sh", "-c", command.command],
            cwd=skill.base_path,
            capture_output=True,
            text=True,
            timeout=command.timeout_seconds,
            check=False,
        )
        assert result.returncode == 0, result.stderr


def test_text_stats_bootstrap_compiles_the_stopword_list(tmp_path: Path) -> None:
    skill = copy_skill("text-stats", tmp_path)
    bootstrap(skill)
    words = (skill / "build" / "stopwords.txt").read_text(encoding="utf-8").splitlines()
    assert words == sorted(set(words))
    assert all(w == w.lower() and w.strip() == w and " " not in w and w for w in words)
    assert {"a", "about", "the", "yourselves"} <= set(words)
    assert not any(w.startswith("#") or w in {"duplicates", "comment"} for w in words)
    bootstrap(skill)  # running it again is harmless
    assert (skill / "build" / "stopwords.txt").read_text(encoding="utf-8").splitlines() == words
    assert sorted(p.name for p in (skill / "build").iterdir()) == ["stopwords.txt"]


def test_text_stats_reports_counts_and_top_words(tmp_path: Path) -> None:
    skill = copy_skill("text-stats", tmp_path)
    bootstrap(skill)
    text = tmp_path / "input.txt"
    text.write_text(
        "The cat and the Dog.\nA dog, a DOG; don't stop the 'cat'!\nbird\n", encoding="utf-8"
    )
    result = run([str(skill / "scripts" / "run.sh"), str(text), "3"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "file: input.txt\n"
        "lines: 3\n"
        "words: 14\n"
        "unique words: 8\n"
        "top words (stopwords excluded):\n"
        "      3  dog\n"
        "      2  cat\n"
        "      1  bird\n"
    )


def test_text_stats_runs_on_its_sample_and_rejects_bad_arguments(tmp_path: Path) -> None:
    skill = copy_skill("text-stats", tmp_path)
    bootstrap(skill)
    sample = run(["./scripts/run.sh", "assets/sample.txt", "1"], cwd=skill)
    assert sample.returncode == 0, sample.stderr
    assert sample.stdout.endswith("top words (stopwords excluded):\n      5  skill\n")
    for args in (["assets/sample.txt", "0"], ["assets/sample.txt", "x"], ["missing.txt"], []):
        result = run(["./scripts/run.sh", *args], cwd=skill)
        assert result.returncode == 2, args
        assert result.stderr
