"""A scripted OpenAI Responses server on 127.0.0.1 for the SDK's own ``OpenAIResponsesModel``.

Unlike :mod:`model_stub` (one ``bash`` call, then text), each request to ``/v1/responses`` is
answered with the next step of a script: a list of function calls ``(name, arguments)`` or a
final text. Every request body is recorded, so a test sees the tool schema the SDK really sent
on each model iteration (``tool_names``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents import OpenAIResponsesModel
from openai import AsyncOpenAI

Step = Sequence[tuple[str, dict[str, Any]]] | str
"""Function calls ``(name, arguments)`` of one response, or its final text."""


class ScriptedResponses(ThreadingHTTPServer):
    """Answers the n-th ``/v1/responses`` request with ``steps[n]``; records the bodies."""

    daemon_threads = True
    _thread: threading.Thread

    def __init__(self, steps: Sequence[Step]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.steps = list(steps)
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def model(self) -> OpenAIResponsesModel:
        """The SDK's Responses model, its client pointed at this server."""
        client = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{self.server_address[1]}/v1",
            api_key="test-key",
            max_retries=0,
        )
        return OpenAIResponsesModel(model="stub", openai_client=client)

    def tool_names(self) -> list[list[str]]:
        """The function tools' names each request offered the model, request by request."""
        return [
            [tool["name"] for tool in body.get("tools", []) if tool.get("type") == "function"]
            for body in self.bodies
        ]

    def __enter__(self) -> ScriptedResponses:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            turn = len(self.bodies)
            self.bodies.append(body)
        step = self.steps[turn] if turn < len(self.steps) else "(script exhausted)"
        if isinstance(step, str):
            output: list[dict[str, Any]] = [
                {
                    "type": "message",
                    "id": f"msg_{turn}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step, "annotations": []}],
                }
            ]
        else:
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{turn}_{index}",
                    "call_id": f"call_{turn}_{index}",
                    "name": name,
                    "arguments": json.dumps(arguments),
                    "status": "completed",
                }
                for index, (name, arguments) in enumerate(step)
            ]
        return {
            "id": f"resp_{turn}",
            "object": "response",
            "created_at": 0,
            "model": "stub",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedResponses

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/responses":
            self.send_error(404)
            return
        payload = json.dumps(self.server.answer(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
