"""A fake Anthropic Messages API that scripts several real Claude CLI agents at once, offline.

Each agent gets its own base URL (``http://127.0.0.1:<port>/agent/<name>``); the CLI appends
``/v1/messages`` to it, so the path prefix tells agents apart without trusting anything the CLI
puts in the prompt. Every agent follows its own script: a list of steps, each answering one
model turn with a tool call or a final text. A step may

* compute its tool call from what the model has seen so far (the earlier tool results),
* wait for an external condition before answering (``gate``), which is how a test drives two
  agents into a deadlock deterministically: "B asks for f1 only once A waits on f2",
* repeat until its result satisfies a predicate (``until``).

A CLI may send its first turns before its MCP servers are connected (Claude Code, Codex and
Copilot CLI connect them beside the first turn; under load lockyard's server can take a
minute to answer). A request whose tools do not yet offer the tool the next scripted call
needs is answered with the fake's ``warm_up`` call instead (a short ``sleep`` through the
CLI's shell tool), which neither advances the script nor shows in the outcomes.

The server records every request and what it answered, so tests assert on exactly what the model
saw. It answers in the streaming (SSE) form the CLI asks for.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_AGENT_PATH = re.compile(r"^/agent/(?P<agent>[A-Za-z0-9_.-]+)(?P<rest>/.*)$")
_FIRST_POLL_SECONDS = 0.02
_LONGEST_POLL_SECONDS = 0.25
"""A gate is re-checked after a pause that doubles up to this: most gates open within a few
checks, and a gate that waits on a CLI still starting (a minute under load) must not take the
CPU that CLI needs (each check reads the lock directory and the session registry)."""
WARM_UP = "warmup_"
"""Marks a warm-up call's id, so its result is left out of the outcomes."""
_WARM_UP_PAUSE_SECONDS = 0.5
"""Paces warm-up turns: a CLI whose warm-up fails at once (its guard hook not up yet) would
otherwise ask again as fast as it can, taking the CPU its own MCP server needs to start."""
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
"""The CLI appends these to tool results: in a block of their own, or inside an error's text."""


# --- what a script step answers -------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    """The model calls tool ``name`` with ``input``."""

    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class Reply:
    """The model ends its turn with ``text``."""

    text: str


Action = ToolUse | Reply


@dataclass(frozen=True)
class ToolOutcome:
    """One tool result as the model saw it, paired with the call that produced it."""

    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    is_error: bool
    text: str
    """The tool's own text blocks, joined by newlines (the CLI's reminders left out)."""
    reminders: tuple[str, ...] = ()
    """``<system-reminder>`` blocks the CLI appended to the result (hook context lands here)."""

    @property
    def json(self) -> Any:
        """The result text parsed as JSON (our lock tools answer in JSON), else None."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None


@dataclass(frozen=True)
class Turn:
    """What the model knows when a step answers: the request and every tool result so far."""

    agent: str
    outcomes: tuple[ToolOutcome, ...]
    body: Mapping[str, Any]

    @property
    def last(self) -> ToolOutcome | None:
        return self.outcomes[-1] if self.outcomes else None


@dataclass(frozen=True)
class Step:
    """One model turn of a script.

    ``action`` is the answer, or a function of the turn that returns it. ``gate`` blocks the
    answer until it returns true (checked after pauses of 20 to 250 ms, failing the run after
    the server's ``gate_timeout``). ``until`` re-issues this step until its latest result
    satisfies it.
    """

    action: Action | Callable[[Turn], Action]
    gate: Callable[[], bool] | None = None
    until: Callable[[ToolOutcome], bool] | None = None
    label: str = ""


def call(
    name: str,
    tool_input: Mapping[str, Any] | None = None,
    *,
    gate: Callable[[], bool] | None = None,
    until: Callable[[ToolOutcome], bool] | None = None,
    label: str = "",
) -> Step:
    """A step that calls tool ``name`` with ``tool_input``."""
    return Step(ToolUse(name, dict(tool_input or {})), gate=gate, until=until, label=label)


def say(text: str, *, gate: Callable[[], bool] | None = None) -> Step:
    """A step that ends the agent's turn with ``text``."""
    return Step(Reply(text), gate=gate)


# --- what the server saw ----------------------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One request from the CLI and the answer it got."""

    agent: str | None
    path: str
    body: Mapping[str, Any]
    answer: Action | None
    """None for requests that are not a scripted agent's model turn."""
    at: float
    """When the answer was ready (after any gate), as ``time.time()``."""


class ScriptError(AssertionError):
    """The script could not be followed: a gate timed out, an agent was unknown, a step raised."""


@dataclass
class _AgentScript:
    steps: list[Step]
    done_text: str
    cursor: int = 0
    answered: dict[int, Action] = field(default_factory=dict)
    """Answers by conversation length, so a retried request gets the same answer again."""
    pending: set[int] = field(default_factory=set)
    """Turns being answered (waiting in a gate): a CLI that gives up on one and asks again
    waits for the same answer instead of taking the next step."""


# --- the server -------------------------------------------------------------------------------


class FakeMessagesApi:
    """A threaded HTTP server on 127.0.0.1 that plays the model for several scripted agents."""

    def __init__(self, *, gate_timeout: float = 30.0, warm_up: ToolUse | None = None) -> None:
        self.gate_timeout = gate_timeout
        self.warm_up = warm_up
        self._scripts: dict[str, _AgentScript] = {}
        self._exchanges: list[Exchange] = []
        self._errors: list[str] = []
        self._lock = threading.RLock()  # wait_until holds it while conditions read state
        self._changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeMessagesApi:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handler threads blocked in a gate
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeMessagesApi:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # scripting

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def script(self, agent: str, steps: Sequence[Step], *, done_text: str = "done") -> str:
        """Give ``agent`` its script; returns the agent's base URL. Past the end: ``done_text``."""
        if not _AGENT_PATH.match(f"/agent/{agent}/"):
            raise ValueError(f"agent name {agent!r} must match [A-Za-z0-9_.-]+")
        with self._lock:
            self._scripts[agent] = _AgentScript(list(steps), done_text)
        return self.base_url(agent)

    def base_url(self, agent: str) -> str:
        return f"http://127.0.0.1:{self.port}/agent/{agent}"

    def cli_env(self, agent: str, home: str) -> dict[str, str]:
        """The environment that points the bundled CLI at this server as ``agent``, offline."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url(agent),
            "ANTHROPIC_API_KEY": f"sk-ant-fake-{agent}",
            "ANTHROPIC_AUTH_TOKEN": "",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # An MCP server that needs more than the CLI's 30 s to start (a loaded machine)
            # would be killed, its tools gone, and the guard it serves with it.
            "MCP_TIMEOUT": "180000",
            "HOME": home,
        }

    # inspection

    @property
    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def answers(self, agent: str) -> list[Action]:
        """What the fake model answered ``agent``, turn by turn."""
        return [x.answer for x in self.exchanges if x.agent == agent and x.answer is not None]

    def outcomes(self, agent: str) -> tuple[ToolOutcome, ...]:
        """Every tool result ``agent``'s model has seen, from its latest scripted request."""
        turns = [x for x in self.exchanges if x.agent == agent and x.answer is not None]
        if not turns:
            return ()
        return self._read_outcomes(turns[-1].body)

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Block until ``condition()`` holds (re-checked whenever a request arrives)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.1))
        return True

    def raise_errors(self) -> None:
        """Fail the test if any script step could not be followed."""
        if errors := self.errors:
            raise ScriptError("; ".join(errors))

    # request handling

    # the model API's protocol (another CLI's fake overrides these four)

    def _is_model_turn(self, path: str) -> bool:
        return path.startswith("/v1/messages") and "count_tokens" not in path

    def _turn_key(self, body: Mapping[str, Any]) -> int:
        """The conversation's length: a retried request has the same key, a new turn not."""
        return len(body.get("messages", []))

    def _read_outcomes(self, body: Mapping[str, Any]) -> tuple[ToolOutcome, ...]:
        return _outcomes(body)

    def _reply(
        self, handler: Any, path: str, body: Mapping[str, Any], answer: Action | None
    ) -> None:
        if path.startswith("/v1/messages") and "count_tokens" in path:
            handler._send_json(200, {"input_tokens": 10})
        elif not path.startswith("/v1/messages"):
            handler._send_json(404, {"type": "error", "error": {"type": "not_found_error"}})
        else:
            message = _message(answer or Reply("ok"), str(body.get("model", "claude")))
            if body.get("stream"):
                handler._send(200, "text/event-stream", b"".join(_sse_events(message)))
            else:
                handler._send_json(200, message)

    def _offers(self, body: Mapping[str, Any], tool: str) -> bool:
        """Whether the request offers the model ``tool``."""
        if tool in {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}:
            return True
        # Claude Code defers MCP tools: once connected, they are named in a reminder of the
        # conversation ("deferred tools are now available"), not in the tools list.
        return tool in json.dumps(body.get("messages", []))

    def _answer(self, agent: str | None, path: str, body: Mapping[str, Any]) -> Action | None:
        if agent is None or not self._is_model_turn(path):
            return None
        if self.warm_up is not None and self._lacks_next_tool(agent, body):
            time.sleep(_WARM_UP_PAUSE_SECONDS)
            return ToolUse(WARM_UP + self.warm_up.name, self.warm_up.input)
        with self._lock:
            script = self._scripts.get(agent)
        if script is None:
            self._fail(f"request from unscripted agent {agent!r}")
            return Reply("unscripted agent")
        turn = Turn(agent, self._read_outcomes(body), body)
        key = self._turn_key(body)
        with self._changed:
            if key in script.pending:
                while key not in script.answered and not self._stopping.is_set():
                    self._changed.wait(1.0)
            if key in script.answered:
                return script.answered[key]
            script.pending.add(key)
            try:
                step = _next_step(script, turn)
            except Exception as exc:  # a broken `until` must fail the test, not hang the CLI
                self._errors.append(f"{agent}: an `until` predicate raised {exc!r}")
                script.cursor = len(script.steps)
                step = None
        if step is None:
            action: Action = Reply(script.done_text)
        else:
            action = self._run_step(agent, step, turn)
        with self._changed:
            script.answered[key] = action
            script.pending.discard(key)
            self._changed.notify_all()
        return action

    def _lacks_next_tool(self, agent: str, body: Mapping[str, Any]) -> bool:
        """Whether the step this request will get calls a tool the request does not offer."""
        with self._lock:
            script = self._scripts.get(agent)
            if script is None:
                return False
            index = script.cursor + (1 if script.answered else 0)  # as `_next_step` moves
            step = script.steps[index] if index < len(script.steps) else None
        if step is None or not isinstance(step.action, ToolUse):
            return False
        return not self._offers(body, step.action.name)

    def _run_step(self, agent: str, step: Step, turn: Turn) -> Action:
        label = step.label or str(step.action)
        if step.gate is not None and not self._wait_gate(step.gate, f"{agent}: step {label!r}"):
            self._fail(f"{agent}: gate of step {label!r} did not open in {self.gate_timeout}s")
            return Reply(f"gate timed out: {label}")
        try:
            return step.action(turn) if callable(step.action) else step.action
        except Exception as exc:  # a broken script must fail the test, not hang the CLI
            self._fail(f"{agent}: step {label!r} raised {exc!r}")
            return Reply(f"script error: {exc!r}")

    def _wait_gate(self, gate: Callable[[], bool], where: str) -> bool:
        deadline = time.monotonic() + self.gate_timeout
        pause = _FIRST_POLL_SECONDS
        while not self._stopping.is_set():
            try:
                if gate():
                    return True
            except Exception as exc:
                self._fail(f"{where}: gate raised {exc!r}")
                return False
            if time.monotonic() >= deadline:
                return False
            self._stopping.wait(pause)
            pause = min(pause * 2, _LONGEST_POLL_SECONDS)
        return False

    def _fail(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    def _record(self, exchange: Exchange) -> None:
        with self._changed:
            self._exchanges.append(exchange)
            self._changed.notify_all()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_GET(self) -> None:
                self._send_json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def do_HEAD(self) -> None:
                self._send(200, "text/plain", b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                matched = _AGENT_PATH.match(self.path)
                agent = matched["agent"] if matched else None
                path = matched["rest"] if matched else self.path
                try:
                    answer = api._answer(agent, path, body)
                except Exception as exc:  # answer anyway: the CLI would retry a 5xx for a minute
                    api._fail(f"answering {agent!r} raised {exc!r}")
                    answer = Reply(f"harness error: {exc!r}")
                api._record(Exchange(agent, path, body, answer, time.time()))
                api._reply(self, path, body, answer)

            def _send_json(self, status: int, payload: Mapping[str, Any]) -> None:
                self._send(status, "application/json", json.dumps(payload).encode())

            def _send(self, status: int, content_type: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def _next_step(script: _AgentScript, turn: Turn) -> Step | None:
    """Advance the cursor past the step just served, unless it must repeat."""
    if script.answered:  # not the first turn: decide whether the previous step repeats
        previous = script.steps[script.cursor] if script.cursor < len(script.steps) else None
        if (
            previous is None
            or previous.until is None
            or turn.last is None
            or previous.until(turn.last)
        ):
            script.cursor += 1
    return script.steps[script.cursor] if script.cursor < len(script.steps) else None


# --- reading a request ------------------------------------------------------------------------


def _outcomes(body: Mapping[str, Any]) -> tuple[ToolOutcome, ...]:
    """Pair every tool_result in the conversation with the tool_use that asked for it."""
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    found: list[ToolOutcome] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls[block["id"]] = (block.get("name", ""), block.get("input") or {})
            elif block.get("type") == "tool_result":
                if WARM_UP in block.get("tool_use_id", ""):
                    continue
                name, tool_input = calls.get(block.get("tool_use_id", ""), ("", {}))
                text = "\n".join(_result_texts(block.get("content")))
                found.append(
                    ToolOutcome(
                        tool_use_id=block.get("tool_use_id", ""),
                        name=name,
                        input=tool_input,
                        is_error=bool(block.get("is_error")),
                        text=_REMINDER.sub("", text).strip(),
                        reminders=tuple(m.group(0) for m in _REMINDER.finditer(text)),
                    )
                )
    return tuple(found)


def _result_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        ]
    return []


# --- writing an answer ------------------------------------------------------------------------


def _message(action: Action, model: str) -> dict[str, Any]:
    if isinstance(action, ToolUse):
        warm_up = action.name.startswith(WARM_UP)
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{WARM_UP if warm_up else ''}{uuid.uuid4().hex[:24]}",
            "name": action.name.removeprefix(WARM_UP),
            "input": dict(action.input),
        }
        stop_reason = "tool_use"
    else:
        block = {"type": "text", "text": action.text}
        stop_reason = "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _sse_events(message: Mapping[str, Any]) -> Iterator[bytes]:
    """The message as the event stream of a streaming Messages API response."""

    def event(name: str, data: Mapping[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    start = {**message, "content": [], "stop_reason": None}
    yield event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        yield event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield event("message_stop", {"type": "message_stop"})
