"""One half of a paused run, in its own process (driven by test_resume_process.py).

``first``: run the skill turn and call ``publish_report``, which needs approval, so the run pauses;
the serialised ``RunState`` (with the sandbox session state inside) goes to STATE_FILE.
``second``: load that state, approve, and finish the run: the approved tool runs, then a command
reads the report the first process left in the conversation's workspace.
Prints one JSON line: the tool outputs, the final output and the session state it saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agents import Runner
from agents.run_state import RunState
from agents.testing import ScriptedModel, assistant_message, function_call
from skillruntime.openai_agents import SkillRuntimeSandboxClient

import agents_sdk_runs as scripted


async def main(phase: str, runtime: str, options: str, conversation: str, state_file: Path) -> None:
    client = SkillRuntimeSandboxClient.for_runtime(runtime, **json.loads(options))
    if phase == "first":
        steps = scripted.skill_steps()[:2]
        steps.append(
            [function_call("publish_report", {"path": "notes/report.txt"}, call_id="publish")]
        )
        model = ScriptedModel(steps)
        result = await Runner.run(
            scripted.agent(model),
            "Report on the sample.",
            run_config=scripted.run_config(client, conversation),
        )
        assert len(result.interruptions) == 1, result.interruptions
        state_file.write_text(result.to_state().to_string())
        final = None
    else:
        model = ScriptedModel(
            [
                [function_call("exec_command", {"cmd": "cat notes/report.txt"}, call_id="read")],
                [assistant_message("Published.")],
            ]
        )
        agent = scripted.agent(model)
        state = await RunState.from_string(agent, state_file.read_text())
        for interruption in state.get_interruptions():
            state.approve(interruption)
        result = await Runner.run(agent, state, run_config=scripted.run_config(client))
        final = result.final_output
    model.assert_complete()
    print(json.dumps({"outputs": scripted.outputs(result), "final": final}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5], Path(sys.argv[5])))
