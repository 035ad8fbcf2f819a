"""Per-call overhead of a tool call through MCP stdio against a direct ``SkillTools.dispatch``.

    .venv/bin/python tests/benchmarks/bench_mcp.py [--runs 300]

Both sides use the local runtime on the same conversation workspace and the same tool calls:
``read`` of a small file (no process: the call overhead dominates) and ``bash true`` (one
process per call). The MCP side is the SDK's client on ``skillruntime mcp serve`` as a
subprocess; each call is timed from the client's ``call_tool`` to its result. The direct side
times ``SkillTools.dispatch`` in this process. Calls alternate between the two sides; the
medians and their ratio are printed, with the absolute MCP overhead per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row

from mcp_clients import serve_args, stdio_session
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime

SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"
CALLS = [
    ("read", {"file_path": "small.txt"}),
    ("bash", {"command": "true"}),
]


async def measure(runs: int, root: Path) -> dict[str, tuple[float, float]]:
    conversation = "bench"
    args = serve_args(SKILLS, options=[f"conversations_root={root}"], conversation=conversation)
    results: dict[str, tuple[float, float]] = {}
    with LocalSkillRuntime(conversation_id=conversation, conversations_root=root) as runtime:
        runtime.get_file_system().write_text("small.txt", "one line\n" * 20)
        tools = SkillTools(runtime, [SKILLS])
        async with stdio_session(args) as (session, _):
            for name, arguments in CALLS:
                for _ in range(10):  # warm-up on both sides
                    await session.call_tool(name, arguments)
                    tools.dispatch(name, arguments)
                through_mcp: list[float] = []
                direct: list[float] = []
                for _ in range(runs):
                    start = time.perf_counter()
                    result = await session.call_tool(name, arguments)
                    through_mcp.append(time.perf_counter() - start)
                    assert result.is_error is False
                    start = time.perf_counter()
                    tools.dispatch(name, arguments)
                    direct.append(time.perf_counter() - start)
                results[name] = (statistics.median(through_mcp), statistics.median(direct))
    return results


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    with tempfile.TemporaryDirectory() as root:
        results = asyncio.run(measure(5 if quick else 300, Path(root)))
    return [
        Row(f"{name} through MCP stdio", through_mcp, direct, note="SkillTools.dispatch")
        for name, (through_mcp, direct) in results.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        results = asyncio.run(measure(options.runs, Path(root)))
    for name, (through_mcp, direct) in results.items():
        print(
            f"{name:5}: MCP stdio {through_mcp * 1e3:7.3f} ms, direct dispatch "
            f"{direct * 1e3:7.3f} ms, ratio {through_mcp / direct:6.2f}x, "
            f"overhead {(through_mcp - direct) * 1e3:6.3f} ms/call"
        )


if __name__ == "__main__":
    main()
