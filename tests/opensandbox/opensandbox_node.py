"""One "node" of the multi-node OpenSandbox test, run as its own process.

Usage: ``python opensandbox_node.py '<json arguments>'``. It waits for the start file (bounded
polling), opens the conversation with a SQL store URL, prepares the skills it is given, optionally
writes and reads files, and prints one JSON line describing what it saw.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from skillruntime.core.models import Skill, SkillPreparationRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime


def main() -> None:
    arguments = json.loads(sys.argv[1])
    start = Path(arguments["start_file"])
    deadline = time.monotonic() + 60
    while not start.exists():
        if time.monotonic() > deadline:
            raise SystemExit("start file never appeared")
        time.sleep(0.005)
    runtime = OpenSandboxSkillRuntime(
        domain=arguments["domain"],
        api_key=arguments["api_key"],
        conversation_id=arguments["conversation_id"],
        conversation_store=arguments["store_url"],
    )
    try:
        skills = tuple(
            Skill(name=name, description="d", base_path=path) for name, path in arguments["skills"]
        )
        prepared = runtime.prepare(SkillPreparationRequest(skills=skills))
        fs = runtime.get_file_system()
        for path, text in arguments.get("write", {}).items():
            fs.write_text(path, text)
        read = {path: fs.read_text(path) for path in arguments.get("read", [])}
        print(
            json.dumps(
                {
                    "sandbox_id": runtime.sandbox_id,
                    "base_paths": [skill.base_path for skill in prepared],
                    "read": read,
                }
            )
        )
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
