"""The main job: run the example skills end to end with the local runtime in a conversation.

Discovers ``examples/skills``, prepares ``csv-report`` and ``text-stats`` (whose bootstrap step runs
once) into the conversation workspace ``.demo/conversations/demo``, runs both skills there, reads
the results back through the runtime's file system and prints where the reports landed.

Run it with ``make demo`` (or ``.venv/bin/python examples/demo.py [--root DIR] [--audit]``).
The console shows what the skills produced; the audit trail (one JSON line per operation on the
``skillruntime.audit`` logger) and the library's info logging go to stderr only with ``--audit``
or ``SKILLRUNTIME_DEMO_AUDIT=1``. Warnings and errors are always shown.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from skillruntime.core import (
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
    create_runtime,
)
from skillruntime.core.skills import discover_skills, skill_bootstrap_commands

EXAMPLES = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(".demo/conversations"))
    parser.add_argument("--conversation", default="demo")
    parser.add_argument(
        "--audit",
        action="store_true",
        default=os.environ.get("SKILLRUNTIME_DEMO_AUDIT", "") not in ("", "0"),
        help="Also log the audit trail and info messages on stderr "
        "(default: $SKILLRUNTIME_DEMO_AUDIT).",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.audit else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )

    skills = discover_skills(EXAMPLES / "skills", names=["csv-report", "text-stats"], strict=True)
    configs = {
        skill.name: SkillRuntimeConfig(bootstrap=skill_bootstrap_commands(skill))
        for skill in skills
    }
    root = args.root.resolve()
    with create_runtime(
        "local", conversation_id=args.conversation, conversations_root=str(root)
    ) as runtime:
        prepared = {
            skill.name: skill
            for skill in runtime.prepare(SkillPreparationRequest(skills=skills, configs=configs))
        }
        print(f"runtime: {runtime.name}, workspace: {runtime.default_working_directory}")
        for skill in prepared.values():
            print(f"prepared {skill.name} at {skill.base_path}")

        report = prepared["csv-report"].base_path
        stats = prepared["text-stats"].base_path
        steps = [
            (
                "csv-report",
                f"python3 {shlex.quote(report + '/scripts/report.py')} "
                f"{shlex.quote(report + '/assets/sample.csv')} report --title 'Sample sales'",
            ),
            (
                "text-stats",
                f"{shlex.quote(stats + '/scripts/run.sh')} "
                f"{shlex.quote(stats + '/assets/sample.txt')} 5 > report/text-stats.txt",
            ),
        ]
        for name, command in steps:
            result = runtime.execute(SkillExecutionRequest(command=command, timeout_seconds=60))
            print(f"\n$ {name}: exit {result.exit_code} in {result.duration_seconds:.3f}s")
            if result.stdout:
                print(result.stdout.rstrip())
            if not result.ok:
                print(result.stderr.rstrip(), file=sys.stderr)
                return 1

        fs = runtime.get_file_system()
        print("\ntext-stats wrote report/text-stats.txt:")
        print(fs.read_text("report/text-stats.txt", max_bytes=1 << 20).rstrip())
        print("\nfiles written in the workspace:")
        for info in fs.list_directory("report"):
            print(f"  {info.path} ({info.size} bytes)")
        markdown = fs.read_text("report/report.md", max_bytes=1 << 20)
        print("\nreport.md starts with:")
        print("\n".join(markdown.splitlines()[:8]))
        print(f"\nOpen {runtime.default_working_directory}/report/report.html in a browser.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
