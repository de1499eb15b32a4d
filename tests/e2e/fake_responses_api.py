"""The fake model API for Codex CLI: the OpenAI Responses API (`POST /v1/responses`, SSE).

Same scripts, gates and records as `FakeMessagesApi`; only the wire protocol differs. Codex
reaches it as a custom model provider (`wire_api = "responses"`, `base_url =
http://127.0.0.1:<port>/agent/<name>/v1`).

- A model turn answers one `function_call` output item or one assistant `message`.
- Codex offers an MCP server's tools as a `namespace` tool (`mcp__lockyard` holding
  `lock_acquire`, ...), so a scripted call to `mcp__lockyard__lock_acquire` is sent as
  `{"namespace": "mcp__lockyard", "name": "lock_acquire"}`.
- Codex starts its MCP servers beside the first turn: a request whose tools do not offer the
  namespace the next scripted call needs yet is answered with a short `sleep` through its
  shell tool instead (a warm-up that neither advances the script nor shows in the outcomes).
- Tool results are the request's `function_call_output` items, paired by `call_id`; a text
  Codex marks as blocked (a hook's deny) or unsupported is recorded as an error.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from fake_messages_api import WARM_UP, Action, FakeMessagesApi, Reply, ToolOutcome, ToolUse

_ERROR_PREFIXES = ("Command blocked by PreToolUse hook", "unsupported call", "Blocked by")


def _split(name: str) -> tuple[str | None, str]:
    """`mcp__server__tool` -> ("mcp__server", "tool"); other names have no namespace."""
    if name.startswith("mcp__") and name.count("__") >= 2:
        namespace, _, tool = name.rpartition("__")
        return namespace, tool
    return None, name


class FakeResponsesApi(FakeMessagesApi):
    def __init__(self, *, gate_timeout: float = 30.0) -> None:
        super().__init__(
            gate_timeout=gate_timeout, warm_up=ToolUse("exec_command", {"cmd": "sleep 1"})
        )

    def cli_env(self, agent: str, home: str) -> dict[str, str]:
        return {"CODEX_HOME": home, "FAKE_OPENAI_KEY": f"fake-key-{agent}", "HOME": home}

    def _is_model_turn(self, path: str) -> bool:
        return path.rstrip("/").endswith("/responses")

    def _turn_key(self, body: Mapping[str, Any]) -> int:
        return len(body.get("input", []))

    def _offers(self, body: Mapping[str, Any], tool: str) -> bool:
        # Codex offers an MCP server's tools as one namespace tool: only those come late.
        namespace, _ = _split(tool)
        return namespace is None or super()._offers(body, namespace)

    def _read_outcomes(self, body: Mapping[str, Any]) -> tuple[ToolOutcome, ...]:
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        found: list[ToolOutcome] = []
        for item in body.get("input", []):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                namespace = item.get("namespace")
                name = f"{namespace}__{item.get('name')}" if namespace else str(item.get("name"))
                try:
                    arguments = json.loads(item.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                calls[str(item.get("call_id"))] = (name, arguments)
            elif item.get("type") == "function_call_output":
                call_id = str(item.get("call_id"))
                if call_id.startswith(WARM_UP):
                    continue
                name, arguments = calls.get(call_id, ("", {}))
                text = _output_text(item.get("output"))
                found.append(ToolOutcome(
                    tool_use_id=call_id, name=name, input=arguments,
                    is_error=text.startswith(_ERROR_PREFIXES), text=text,
                ))  # fmt: skip
        return tuple(found)

    def _reply(
        self, handler: Any, path: str, body: Mapping[str, Any], answer: Action | None
    ) -> None:
        if not self._is_model_turn(path):
            handler._send_json(200, {"object": "list", "data": [], "models": []})
            return
        action = answer if answer is not None else Reply("")
        turn = uuid.uuid4().hex[:12]
        if isinstance(action, ToolUse):
            call_id = f"call_{turn}"
            name = action.name
            if name.startswith(WARM_UP):
                name, call_id = name[len(WARM_UP) :], f"{WARM_UP}{turn}"
            namespace, tool = _split(name)
            item: dict[str, Any] = {
                "type": "function_call", "id": f"fc_{turn}", "call_id": call_id, "name": tool,
                "arguments": json.dumps(dict(action.input)), "status": "completed",
            }  # fmt: skip
            if namespace is not None:
                item["namespace"] = namespace
        else:
            item = {
                "type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": action.text, "annotations": []}],
            }  # fmt: skip
        usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
                 "output_tokens_details": None, "total_tokens": 15}  # fmt: skip
        events = [
            {"type": "response.created", "response": {"id": f"resp_{turn}"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": f"resp_{turn}", "usage": usage}},
        ]
        stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        handler._send(200, "text/event-stream", stream.encode())


def _output_text(output: Any) -> str:
    """A function_call_output's text: a string, or the text of its content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [str(part.get("text", "")) for part in output if isinstance(part, dict)]
        # Codex puts a wall-time line first for MCP results; the tool's own text follows it.
        return "\n".join(t for t in texts if not t.startswith("Wall time:")) or "\n".join(texts)
    return json.dumps(output)
