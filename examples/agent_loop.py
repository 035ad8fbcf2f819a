"""One complete agent turn over the skill tools, driven by a scripted model (no network).

The "model" is a list of steps that each emit one OpenAI-style tool call; a real loop would get
them from ``client.chat.completions.create(..., tools=tools.openai_tools())``. The turn runs
against the local runtime in a conversation workspace under a temporary directory:

    skill (csv-report) -> bash (run its script) -> read (the report) -> edit (retitle it)
    -> publish_file (deliver it) -> final answer with the link

Run it with ``python examples/agent_loop.py`` (add ``--keep`` to keep the temporary directory).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillruntime.core.files.publishing import LocalDirectoryPublisher
from skillruntime.core.skills import load_skill
from skillruntime.core.tools import SkillTools, openai_tool_message
from skillruntime.local import LocalSkillRuntime

SKILL_DIRECTORY = Path(__file__).resolve().parent / "skills" / "csv-report"

Message = dict[str, Any]
Step = Callable[[list[Message]], Message]

_CALL_IDS = itertools.count(1)


def last_tool_result(messages: list[Message]) -> str:
    """The content of the most recent tool message."""
    return str(next(m["content"] for m in reversed(messages) if m["role"] == "tool"))


def tool_call(name: str, arguments: dict[str, Any]) -> Message:
    """An assistant message with one tool call, shaped like the OpenAI Chat Completions API."""
    call_id = f"call_{next(_CALL_IDS)}"
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def base_directory(messages: list[Message]) -> str:
    """What the model learns from the skill tool: the skill's base directory in the runtime."""
    for message in messages:
        if message["role"] == "tool":
            found = re.search(r"^Base directory for this skill: (.+)$", message["content"], re.M)
            if found:
                return found.group(1)
    raise RuntimeError("the skill was not loaded")


def published_url(result: str) -> str:
    """The URL line of a ``publish_file`` result."""
    found = re.search(r"^URL: (.+)$", result, re.M)
    if found is None:
        raise RuntimeError(f"publishing failed: {result}")
    return found.group(1)


SCRIPT: list[Step] = [
    lambda messages: tool_call("skill", {"command": "csv-report"}),
    lambda messages: tool_call(
        "bash",
        {
            "command": (
                f"python3 {base_directory(messages)}/scripts/report.py "
                f"{base_directory(messages)}/assets/sample.csv out"
            ),
            "timeout_seconds": 60,
        },
    ),
    lambda messages: tool_call("read", {"file_path": "out/report.md", "limit": 8}),
    lambda messages: tool_call(
        "edit",
        {
            "file_path": "out/report.md",
            "old_string": "# Report: sample.csv",
            "new_string": "# Sales sample: column profile",
        },
    ),
    lambda messages: tool_call("publish_file", {"file_path": "out/report.md"}),
    lambda messages: {
        "role": "assistant",
        "content": "Your report is ready: " + published_url(last_tool_result(messages)),
    },
]


def run(workdir: Path) -> str:
    """Run the scripted turn in ``workdir``; return the final assistant text."""
    skill = load_skill(SKILL_DIRECTORY, strict=True)
    if skill is None:
        raise RuntimeError(f"cannot load the example skill at {SKILL_DIRECTORY}")
    publisher = LocalDirectoryPublisher(workdir / "published")
    with LocalSkillRuntime(
        conversation_id="demo-conversation", conversations_root=workdir / "conversations"
    ) as runtime:
        tools = SkillTools(runtime, [skill], publisher=publisher)
        messages: list[Message] = [
            {"role": "user", "content": "Profile the sample sales CSV and send me the report."}
        ]
        print(f"user: {messages[0]['content']}")
        print(f"tools offered: {', '.join(t['function']['name'] for t in tools.openai_tools())}")
        for step in SCRIPT:
            reply = step(messages)
            messages.append(reply)
            if not reply.get("tool_calls"):
                print(f"\nassistant: {reply['content']}")
                return str(reply["content"])
            for call in reply["tool_calls"]:
                function = call["function"]
                print(f"\n>>> {function['name']}({function['arguments']})")
                result = openai_tool_message(tools, call)
                print(result["content"])
                messages.append(result)
    raise RuntimeError("the script ended without a final answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="skillruntime-agent-loop-"))
    try:
        run(workdir)
    finally:
        if args.keep:
            print(f"\n(files kept in {workdir})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
