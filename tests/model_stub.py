"""A scripted model server on 127.0.0.1 for the real ``openai`` and ``anthropic`` clients.

It answers Chat Completions (``/v1/chat/completions``), Responses (``/v1/responses``) and
Messages (``/v1/messages``) requests: the first request on a path with a ``bash`` tool call
running ``echo from-the-runtime`` (:data:`COMMAND`), every later one with the text ``done``.
Each request body is recorded. Point a client at it with ``base_url`` (``<url>/v1`` for
OpenAI, ``<url>`` for Anthropic) or the ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL`` variables.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubModel(ThreadingHTTPServer):
    """Answers the first request of a conversation with a ``bash`` tool call and the second
    (the one carrying the tool result) with text; records every request body."""

    daemon_threads = True
    _thread: threading.Thread

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> StubModel:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()


COMMAND = {"command": "echo from-the-runtime"}


def _chat_answer(turn: int) -> dict[str, Any]:
    if turn == 0:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps(COMMAND)},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "done"}
        finish = "stop"
    return {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _responses_answer(turn: int) -> dict[str, Any]:
    if turn == 0:
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "bash",
                "arguments": json.dumps(COMMAND),
                "status": "completed",
            }
        ]
    else:
        output = [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
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


def _messages_answer(turn: int) -> dict[str, Any]:
    if turn == 0:
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": COMMAND}
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "done"}]
        stop = "end_turn"
    return {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": "stub",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


ANSWERS = {
    "/v1/chat/completions": _chat_answer,
    "/v1/responses": _responses_answer,
    "/v1/messages": _messages_answer,
}


class _Handler(BaseHTTPRequestHandler):
    server: StubModel

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = ANSWERS.get(self.path)
        if answer is None:
            self.send_error(404)
            return
        turn = sum(1 for path in self.server.paths if path == self.path)
        self.server.paths.append(self.path)
        self.server.bodies.append(body)
        payload = json.dumps(answer(turn)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
