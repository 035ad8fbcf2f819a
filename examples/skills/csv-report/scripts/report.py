#!/usr/bin/env python3
"""Summarise a CSV file as a Markdown report and an HTML report (standard library only).

Usage: report.py [--title TITLE] [--top N] [--delimiter D] CSV_FILE OUTPUT_DIR

Writes OUTPUT_DIR/report.md and OUTPUT_DIR/report.html and prints their paths. For every column
the report gives the number of values and empty cells, the number of distinct values, the minimum,
maximum and mean of its numeric values, and its most frequent values. Exit codes: 0 on success,
2 when the input cannot be read or is not a usable CSV file.
"""

from __future__ import annotations

import argparse
import csv
import html
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass
class ColumnStats:
    """Statistics of one CSV column."""

    name: str
    values: int = 0
    empty: int = 0
    numbers: list[float] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, raw: str) -> None:
        value = raw.strip()
        if not value:
            self.empty += 1
            return
        self.values += 1
        self.counts[value] += 1
        if NUMBER.fullmatch(value):
            self.numbers.append(float(value))

    @property
    def kind(self) -> str:
        if not self.numbers:
            return "text"
        return "numeric" if len(self.numbers) == self.values else "mixed"

    def top(self, limit: int) -> list[tuple[str, int]]:
        return sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))[:limit]

    def numeric_summary(self) -> tuple[str, str, str]:
        if not self.numbers:
            return ("", "", "")
        mean = math.fsum(self.numbers) / len(self.numbers)
        return (fmt(min(self.numbers)), fmt(max(self.numbers)), fmt(mean))


def fmt(number: float) -> str:
    """A short rendering: integers without decimals, others rounded to 4 decimals."""
    if number.is_integer():
        return str(int(number))
    return f"{number:.4f}".rstrip("0").rstrip(".")


def read_csv(path: Path, delimiter: str) -> tuple[list[ColumnStats], int]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise ValueError("the file has no header row")
        columns = [ColumnStats(name.strip() or f"column {i + 1}") for i, name in enumerate(header)]
        rows = 0
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            rows += 1
            for index, column in enumerate(columns):
                column.add(row[index] if index < len(row) else "")
    return columns, rows


def md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_report(
    title: str, source: str, columns: list[ColumnStats], rows: int, top: int
) -> str:
    lines = [
        f"# {md_cell(title)}",
        "",
        f"Source: `{source}` — {rows} rows, {len(columns)} columns.",
        "",
        "| column | type | values | empty | distinct | min | max | mean |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for column in columns:
        low, high, mean = column.numeric_summary()
        lines.append(
            f"| {md_cell(column.name)} | {column.kind} | {column.values} | {column.empty} | "
            f"{len(column.counts)} | {low} | {high} | {mean} |"
        )
    lines += ["", f"## Top {top} values per column", ""]
    for column in columns:
        lines.append(f"### {md_cell(column.name)}")
        lines.append("")
        entries = column.top(top)
        if not entries:
            lines.append("(no values)")
        for value, count in entries:
            shown = value.replace("`", "'")
            lines.append(f"- `{shown}`: {count}")
        lines.append("")
    return "\n".join(lines)


def html_report(title: str, source: str, columns: list[ColumnStats], rows: int, top: int) -> str:
    esc = html.escape
    table_rows = []
    for column in columns:
        low, high, mean = column.numeric_summary()
        cells = [column.name, column.kind, str(column.values), str(column.empty)]
        cells += [str(len(column.counts)), low, high, mean]
        table_rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    sections = []
    for column in columns:
        items = "".join(
            f"<li><code>{esc(value)}</code>: {count}</li>" for value, count in column.top(top)
        )
        sections.append(f"<h3>{esc(column.name)}</h3>\n<ul>{items or '<li>(no values)</li>'}</ul>")
    header = "".join(
        f"<th>{h}</th>"
        for h in ("column", "type", "values", "empty", "distinct", "min", "max", "mean")
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{esc(title)}</title>",
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:.3em .6em}td{text-align:right}"
            "td:first-child,td:nth-child(2){text-align:left}</style>",
            "</head>",
            "<body>",
            f"<h1>{esc(title)}</h1>",
            f"<p>Source: <code>{esc(source)}</code> — {rows} rows, {len(columns)} columns.</p>",
            f"<table>\n<tr>{header}</tr>\n" + "\n".join(table_rows) + "\n</table>",
            f"<h2>Top {top} values per column</h2>",
            *sections,
            "</body>",
            "</html>",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Summarise a CSV file as Markdown and HTML.")
    parser.add_argument("csv_file", type=Path, help="the CSV file to summarise (UTF-8)")
    parser.add_argument("output_dir", type=Path, help="directory that receives the reports")
    parser.add_argument("--title", help="report title (default: 'Report: <file name>')")
    parser.add_argument("--top", type=int, default=5, help="top values per column (default 5)")
    parser.add_argument("--delimiter", default=",", help="field delimiter (default ',')")
    args = parser.parse_args(argv)
    if args.top < 1 or len(args.delimiter) != 1:
        parser.error("--top must be at least 1 and --delimiter one character")
    try:
        columns, rows = read_csv(args.csv_file, args.delimiter)
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as exc:
        print(f"report.py: cannot read {args.csv_file}: {exc}", file=sys.stderr)
        return 2
    title = args.title or f"Report: {args.csv_file.name}"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    outputs = {
        "report.md": markdown_report(title, args.csv_file.name, columns, rows, args.top),
        "report.html": html_report(title, args.csv_file.name, columns, rows, args.top),
    }
    for name, text in outputs.items():
        target = args.output_dir / name
        target.write_text(text, encoding="utf-8")
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
