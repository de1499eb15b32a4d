"""The fake model API for Gemini CLI: the Gemini API's `streamGenerateContent` (SSE), offline.

Same scripts, gates and records as `FakeMessagesApi` (steps are `call(tool, args)` and
`say(text)`); only the wire protocol differs. Gemini CLI reaches it through
`GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port>/agent/<name>`, and appends
`/v1beta/models/<model>:streamGenerateContent?alt=sse`.

- A model turn answers one `functionCall` part (a tool call) or a `text` part (end of turn).
- The tool results the model saw are the `functionResponse` parts of the request, paired in
  order with the model's earlier `functionCall` parts. Gemini CLI puts a tool's output in
  `response.output` and a failure (a hook's deny, a tool error) in `response.error`.
- An MCP tool's output reaches the model wrapped in `<untrusted_context>` tags; the
  recorded outcome holds the text inside them.
- A request that is not a streaming model turn (a routing or token-count call) is answered
  with an empty text: with an explicit `--model`, Gemini CLI makes none.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from fake_messages_api import Action, FakeMessagesApi, Reply, ToolOutcome, ToolUse

_UNTRUSTED = re.compile(r"<untrusted_context>\s*(.*?)\s*</untrusted_context>", re.DOTALL)
"""Gemini CLI wraps an MCP tool's output in these tags before the model sees it."""


class FakeGeminiApi(FakeMessagesApi):
    def cli_env(self, agent: str, home: str) -> dict[str, str]:
        return {
            "GOOGLE_GEMINI_BASE_URL": self.base_url(agent),
            "GEMINI_API_KEY": f"fake-key-{agent}",
            "HOME": home,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }

    def _is_model_turn(self, path: str) -> bool:
        return ":streamGenerateContent" in path

    def _turn_key(self, body: Mapping[str, Any]) -> int:
        return len(body.get("contents", []))

    def _read_outcomes(self, body: Mapping[str, Any]) -> tuple[ToolOutcome, ...]:
        calls: list[tuple[str, Mapping[str, Any]]] = []
        found: list[ToolOutcome] = []
        for content in body.get("contents", []):
            for part in content.get("parts", []) if isinstance(content, dict) else []:
                if not isinstance(part, dict):
                    continue
                if "functionCall" in part:
                    fn = part["functionCall"]
                    calls.append((fn.get("name", ""), fn.get("args") or {}))
                elif "functionResponse" in part:
                    fn = part["functionResponse"]
                    index = len(found)
                    name, args = calls[index] if index < len(calls) else (fn.get("name", ""), {})
                    response = fn.get("response") or {}
                    is_error = "error" in response
                    text = response.get("error") if is_error else response.get("output", response)
                    text = text if isinstance(text, str) else json.dumps(text)
                    found.append(ToolOutcome(
                        tool_use_id=str(fn.get("id", index)), name=name, input=args,
                        is_error=is_error, text=_UNTRUSTED.sub(r"\1", text).strip(),
                    ))  # fmt: skip
        return tuple(found)

    def _reply(
        self, handler: Any, path: str, body: Mapping[str, Any], answer: Action | None
    ) -> None:
        if "/v1beta/models/" not in path:
            handler._send_json(404, {"error": {"code": 404, "message": "not found"}})
            return
        action = answer if answer is not None else Reply("")
        if isinstance(action, ToolUse):
            part: dict[str, Any] = {
                "functionCall": {"name": action.name, "args": dict(action.input),
                                 "id": f"call_{uuid.uuid4().hex[:12]}"},
            }  # fmt: skip
        else:
            part = {"text": action.text}
        response = {
            "candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
        }  # fmt: skip
        if "alt=sse" in path:
            handler._send(
                200, "text/event-stream", f"data: {json.dumps(response)}\r\n\r\n".encode()
            )
        else:
            handler._send_json(200, response)
