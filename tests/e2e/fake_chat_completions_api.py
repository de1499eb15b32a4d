"""The fake model API for CLIs that speak OpenAI Chat Completions (`POST .../chat/completions`):
OpenCode and Kilo (an `@ai-sdk/openai-compatible` provider), GitHub Copilot CLI (its BYOK
provider), pi (an `openai-completions` provider) and Qwen Code (`--auth-type openai`).

Same scripts, gates and records as `FakeMessagesApi`; only the wire protocol differs. Each
agent's base URL is `http://127.0.0.1:<port>/agent/<name>/v1`; the CLI appends
`/chat/completions`.

- A model turn answers one `tool_calls` entry or an assistant text, streamed as
  `chat.completion.chunk` events (`data: [DONE]` last) when the request asks for a stream,
  else as one `chat.completion` object.
- A CLI may start its MCP servers beside the first turn (Copilot CLI does): it gets the
  CLI's `warm_up` call (see `fake_messages_api`) until its request offers the tool.
- A request that offers no tools is not a turn of the script (OpenCode asks for a session
  title that way before the first turn): it is answered with a short text and recorded
  without an answer.
- The tool results the model saw are the request's `role: "tool"` messages, paired by
  `tool_call_id` with the assistant's `tool_calls`. Chat Completions has no error flag: a
  result is recorded as an error when its text starts with one of the prefixes the CLI puts
  before a refusal (`error_prefixes`, given per CLI).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from fake_messages_api import WARM_UP, Action, FakeMessagesApi, Reply, ToolOutcome, ToolUse


class FakeChatCompletionsApi(FakeMessagesApi):
    def __init__(
        self,
        *,
        gate_timeout: float = 30.0,
        is_refusal: Callable[[str], bool] = lambda _: False,
        warm_up: ToolUse | None = None,
    ) -> None:
        super().__init__(gate_timeout=gate_timeout, warm_up=warm_up)
        self.is_refusal = is_refusal

    def base_url(self, agent: str) -> str:
        return f"{super().base_url(agent)}/v1"

    def cli_env(self, agent: str, home: str) -> dict[str, str]:
        return {"HOME": home}

    def _is_model_turn(self, path: str) -> bool:
        return path.split("?")[0].rstrip("/").endswith("/chat/completions")

    def _turn_key(self, body: Mapping[str, Any]) -> int:
        return len(body.get("messages", []))

    def _answer(self, agent: str | None, path: str, body: Mapping[str, Any]) -> Action | None:
        if not body.get("tools"):
            return None  # a title or summary request: not the scripted conversation
        return super()._answer(agent, path, body)

    def _offers(self, body: Mapping[str, Any], tool: str) -> bool:
        return tool in {(t.get("function") or {}).get("name") for t in body["tools"]}

    def _read_outcomes(self, body: Mapping[str, Any]) -> tuple[ToolOutcome, ...]:
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        found: list[ToolOutcome] = []
        for message in body.get("messages", []):
            if not isinstance(message, dict):
                continue
            for tool_call in message.get("tool_calls") or []:
                function = tool_call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                calls[str(tool_call.get("id"))] = (str(function.get("name", "")), arguments)
            if message.get("role") == "tool":
                call_id = str(message.get("tool_call_id"))
                if call_id.startswith(WARM_UP):
                    continue
                name, arguments = calls.get(call_id, ("", {}))
                text = _content_text(message.get("content"))
                found.append(ToolOutcome(
                    tool_use_id=call_id, name=name, input=arguments,
                    is_error=self.is_refusal(text), text=text,
                ))  # fmt: skip
        return tuple(found)

    def _reply(
        self, handler: Any, path: str, body: Mapping[str, Any], answer: Action | None
    ) -> None:
        if not self._is_model_turn(path):
            if path.rstrip("/").endswith("/models"):
                model = {"id": str(body.get("model", "fake-model")), "object": "model"}
                handler._send_json(200, {"object": "list", "data": [model]})
            else:
                handler._send_json(404, {"error": {"message": f"no such endpoint {path}"}})
            return
        action = answer if answer is not None else Reply("Fake session")
        turn = uuid.uuid4().hex[:12]
        model = str(body.get("model", "fake-model"))
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if isinstance(action, ToolUse):
            arguments = json.dumps(dict(action.input))
            name, call_id = action.name, f"call_{turn}"
            if name.startswith(WARM_UP):
                name, call_id = name[len(WARM_UP) :], f"{WARM_UP}{turn}"
            call = {"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}  # fmt: skip
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": action.text}
            finish = "stop"
        if not body.get("stream"):
            handler._send_json(200, {
                "id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 0,
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            })  # fmt: skip
            return
        delta = dict(message)
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": 0, **call}]
            del delta["content"]

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {"id": f"chatcmpl-{turn}", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": choices, **extra}  # fmt: skip

        events = [
            chunk([{"index": 0, "delta": delta, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {}, "finish_reason": finish}]),
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(chunk([], usage=usage))
        stream = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        handler._send(200, "text/event-stream", stream.encode())


def _content_text(content: Any) -> str:
    """A tool message's text: a string, or the text parts of a list (Qwen Code sends those)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)
