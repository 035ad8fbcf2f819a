"""One "node" of the multi-node OpenSandbox test, run as its own process.

Usage: ``python opensandbox_node.py '<json arguments>'``. It builds the runtime (which contacts
nothing yet), touches ``ready_file`` when given, waits for the start file (bounded polling), then
opens the conversation through a SQL store URL, prepares the skills it is given, optionally writes
and reads files, and prints one JSON line describing what it saw. A test that starts the nodes
only once every ready file exists makes them race for the conversation within milliseconds of
each other instead of being spread out by their interpreter start-up.

Diagnostics: when ``log_file`` is given, every log record of the runtime, the SDK and the store
(DEBUG and up, with timestamps and the process id) goes to that file, and any failure writes its
full traceback (the whole exception chain, causes first) there as well as to stderr, so a test
can show exactly why a node failed. The process then exits with status 1.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from skillruntime.core.models import Skill, SkillPreparationRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime

START_TIMEOUT_SECONDS = 60.0
LOGGED = ("skillruntime", "opensandbox", "doubles")


def _configure_logging(log_file: str | None) -> None:
    if not log_file:
        return
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s.%(msecs)03d pid={os.getpid()} %(threadName)s %(levelname)s "
            "%(name)s: %(message)s",
            datefmt="%H:%M:%S",
        )
    )
    for name in LOGGED:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)


def _run(arguments: dict[str, Any]) -> dict[str, Any]:
    runtime = OpenSandboxSkillRuntime(
        domain=arguments["domain"],
        api_key=arguments["api_key"],
        conversation_id=arguments["conversation_id"],
        conversation_store=arguments["store_url"],
    )
    try:
        ready = arguments.get("ready_file")
        if ready:
            Path(ready).touch()
        start = Path(arguments["start_file"])
        deadline = time.monotonic() + float(arguments.get("start_timeout", START_TIMEOUT_SECONDS))
        while not start.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("start file never appeared")
            time.sleep(0.005)
        skills = tuple(
            Skill(name=name, description="d", base_path=path) for name, path in arguments["skills"]
        )
        prepared = runtime.prepare(SkillPreparationRequest(skills=skills))
        fs = runtime.get_file_system()
        for path, text in arguments.get("write", {}).items():
            fs.write_text(path, text)
        read = {path: fs.read_text(path) for path in arguments.get("read", [])}
        return {
            "sandbox_id": runtime.sandbox_id,
            "base_paths": [skill.base_path for skill in prepared],
            "read": read,
        }
    finally:
        runtime.close()


def main() -> int:
    arguments = json.loads(sys.argv[1])
    log_file = arguments.get("log_file")
    _configure_logging(log_file)
    try:
        result = _run(arguments)
    except BaseException:
        text = traceback.format_exc()
        logging.getLogger("skillruntime").critical("node failed:\n%s", text)
        sys.stderr.write(text)
        sys.stderr.flush()
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
