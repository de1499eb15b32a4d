"""Each agent CLI's hook protocol: what a tool call looks like on stdin, how to answer.

A hook sees a tool call as one of four kinds: a *read* (the file-reading tools: noted as what
the agent saw of the file, never refused), a *write* (the file-editing tools, with the paths
they would write), a *shell* command (judged by the shell and `git commit` guards), or
anything else (allowed: the hook is matched to the first three, anything else is not ours).

- Claude Code: reads are Read; writes are Write, Edit, MultiEdit, NotebookEdit; the shell is
  Bash; a deny is `hookSpecificOutput.permissionDecision: "deny"` with its reason, exit 0.
- Codex CLI: writes are apply_patch (and its matcher aliases Edit, Write), with the patch in
  `tool_input.command`; the shell is Bash; a deny is the same JSON as Claude Code's.
- Gemini CLI: reads are read_file; writes are write_file and replace; the shell is
  run_shell_command; a deny is
  `{"decision": "deny", "reason": ...}`, exit 0.
- OpenCode and Kilo Code (an OpenCode fork): lockyard's plugin passes read, write, edit,
  multiedit, patch and apply_patch, and bash; it reads `{"decision": "deny", "reason": ...}`
  and throws the reason, which blocks the tool.
- GitHub Copilot CLI: `{"toolName", "toolArgs", "cwd"}`; writes are create and edit
  (`path`); the shell is bash; a deny is `{"permissionDecision": "deny",
  "permissionDecisionReason": ...}`, exit 0.
- Qwen Code: Claude Code's payload and answer; reads are read_file; writes are write_file,
  edit and notebook_edit; the shell is run_shell_command.
- pi: lockyard's extension passes read, write and edit (`path`) and bash, and turns a deny into
  `{block: true, reason}`.
- Factory's droid: Claude Code's payload and answer; reads are Read; writes are Create, Edit,
  MultiEdit (`file_path`) and ApplyPatch (the patch in `tool_input.input`); the shell is
  Execute.
- Auggie (read in its 0.36.0 bundle, not run): Claude Code's payload (no `cwd`: its hooks run
  in the workspace root) and answer; reads are view; writes are save-file and
  str-replace-editor (`path`) and remove-files (`file_paths`); the shell is launch-process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..hooks.patch_paths import patch_targets

ToolKind = Literal["read", "write", "shell", "other"]

ACQUIRE_TOOL: Final = "lock_acquire"


class PayloadError(ValueError):
    """The hook's stdin is not a tool call this CLI sends (not JSON, fields missing or wrong)."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the guards need it."""

    tool_name: str
    kind: ToolKind
    paths: list[str] = field(default_factory=list)
    command: str | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class HookAnswer:
    """What the hook process prints and how it exits."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class CliFormat:
    """One CLI's hook protocol. Subclasses name the tools and the answer format."""

    name: str = ""
    display: str = ""
    read_tools: frozenset[str] = frozenset()
    write_tools: frozenset[str] = frozenset()
    shell_tools: frozenset[str] = frozenset()
    acquire_tool: str = ACQUIRE_TOOL
    """The lock tool's name as this CLI shows it to the model."""
    patch_fields: tuple[str, ...] = ()
    """Input fields that may carry an `apply_patch` patch (`*** Update File: ...`); the files
    it names are the call's writes."""

    def parse(self, payload: object) -> ToolCall:
        if not isinstance(payload, dict):
            raise PayloadError(f"the hook input is a JSON {type(payload).__name__}, not an object")
        tool = payload.get(self.tool_name_field)
        if not isinstance(tool, str) or not tool:
            raise PayloadError(f"the hook input has no {self.tool_name_field!r}")
        tool_input = payload.get(self.tool_input_field)
        cwd = payload.get("cwd")
        cwd = cwd if isinstance(cwd, str) and cwd else None
        if tool in self.read_tools:
            paths = (
                _first_string(tool_input, _PATH_KEYS) if isinstance(tool_input, dict) else []
            )  # no path: the tool itself refuses the call, nothing was seen
            return ToolCall(tool, "read" if paths else "other", paths=paths, cwd=cwd)
        if tool in self.write_tools:
            if not isinstance(tool_input, dict):
                raise PayloadError(f"the {tool} call has no {self.tool_input_field!r} object")
            paths = self.write_paths(tool, tool_input)
            if not paths:
                raise PayloadError(f"the {tool} call names no file to write")
            return ToolCall(tool, "write", paths=paths, cwd=cwd)
        if tool in self.shell_tools:
            command = tool_input.get("command") if isinstance(tool_input, dict) else None
            if not isinstance(command, str):
                raise PayloadError(f"the {tool} call has no command string")
            return ToolCall(tool, "shell", command=command, cwd=cwd)
        return ToolCall(tool, "other", cwd=cwd)

    tool_name_field: str = "tool_name"
    tool_input_field: str = "tool_input"

    def write_paths(self, tool: str, tool_input: dict[str, Any]) -> list[str]:
        for key in self.patch_fields:
            value = tool_input.get(key)
            if isinstance(value, str) and "*** " in value:
                return patch_targets(value)
        return _first_string(tool_input, _PATH_KEYS)

    def allow(self) -> HookAnswer:
        return HookAnswer()

    def deny(self, reason: str) -> HookAnswer:
        return HookAnswer(stdout=json.dumps({"decision": "deny", "reason": reason}))


_PATH_KEYS: Final = ("file_path", "notebook_path", "filePath", "absolute_path", "path")


def _first_string(tool_input: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    for key in keys:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return [value]
    return []


class ClaudeCode(CliFormat):
    name = "claude-code"
    display = "Claude Code"
    read_tools = frozenset({"Read"})
    write_tools = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
    shell_tools = frozenset({"Bash"})
    acquire_tool = f"mcp__lockyard__{ACQUIRE_TOOL}"

    def deny(self, reason: str) -> HookAnswer:
        output = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
        return HookAnswer(stdout=json.dumps(output))


class Codex(ClaudeCode):
    name = "codex"
    display = "Codex CLI"
    read_tools = frozenset()  # Codex reads through its shell: the shell viewers are noted
    write_tools = frozenset({"apply_patch", "Edit", "Write"})
    shell_tools = frozenset({"Bash"})
    acquire_tool = f"mcp__lockyard__{ACQUIRE_TOOL}"
    patch_fields = ("command", "patch", "input")


class Gemini(CliFormat):
    name = "gemini"
    display = "Gemini CLI"
    read_tools = frozenset({"read_file"})
    write_tools = frozenset({"write_file", "replace"})
    shell_tools = frozenset({"run_shell_command"})
    acquire_tool = f"mcp_lockyard_{ACQUIRE_TOOL}"


class OpenCode(CliFormat):
    """Fed by lockyard's OpenCode plugin: `{"tool_name", "tool_input", "cwd"}`."""

    name = "opencode"
    display = "OpenCode"
    read_tools = frozenset({"read"})
    write_tools = frozenset({"write", "edit", "multiedit", "patch", "apply_patch"})
    shell_tools = frozenset({"bash"})
    acquire_tool = f"lockyard_{ACQUIRE_TOOL}"
    patch_fields = ("patchText", "patch", "input")


class KiloCode(OpenCode):
    """Kilo Code's CLI is an OpenCode fork: the same plugin hook, fed by lockyard's plugin."""

    name = "kilo"
    display = "Kilo Code"


class Copilot(CliFormat):
    """GitHub Copilot CLI's `preToolUse` hook (camelCase fields, `toolArgs` an object)."""

    name = "copilot"
    display = "GitHub Copilot CLI"
    write_tools = frozenset({"create", "edit", "apply_patch"})
    shell_tools = frozenset({"bash"})
    acquire_tool = f"lockyard-{ACQUIRE_TOOL}"
    tool_name_field = "toolName"
    tool_input_field = "toolArgs"
    patch_fields = ("patch", "input")

    def deny(self, reason: str) -> HookAnswer:
        answer = {"permissionDecision": "deny", "permissionDecisionReason": reason}
        return HookAnswer(stdout=json.dumps(answer))


class QwenCode(ClaudeCode):
    name = "qwen"
    display = "Qwen Code"
    read_tools = frozenset({"read_file"})
    write_tools = frozenset({"write_file", "edit", "notebook_edit"})
    shell_tools = frozenset({"run_shell_command"})
    acquire_tool = f"mcp__lockyard__{ACQUIRE_TOOL}"


class Droid(ClaudeCode):
    """Factory's droid: Claude Code's hook protocol under droid's own tool names (seen with
    droid 0.215.0: `{"tool_name": "Create", "tool_input": {"file_path", "content"}}`)."""

    name = "droid"
    display = "droid"
    read_tools = frozenset({"Read"})
    write_tools = frozenset({"Create", "Edit", "MultiEdit", "ApplyPatch"})
    shell_tools = frozenset({"Execute"})
    acquire_tool = f"lockyard___{ACQUIRE_TOOL}"  # droid names MCP tools <server>___<tool>
    patch_fields = ("input",)


class Auggie(ClaudeCode):
    """Augment's Auggie: Claude Code's hook answer under Auggie's own tool names (from the
    tools' input schemas in its 0.36.0 bundle; never seen from a running Auggie)."""

    name = "auggie"
    display = "Auggie"
    read_tools = frozenset({"view"})
    write_tools = frozenset({"save-file", "str-replace-editor", "remove-files"})
    shell_tools = frozenset({"launch-process"})
    acquire_tool = ACQUIRE_TOOL

    def write_paths(self, tool: str, tool_input: dict[str, Any]) -> list[str]:
        if tool == "remove-files":
            paths = tool_input.get("file_paths")
            if isinstance(paths, list):
                return [path for path in paths if isinstance(path, str) and path]
        return super().write_paths(tool, tool_input)


class Pi(CliFormat):
    """Fed by lockyard's pi extension: `{"tool_name", "tool_input", "cwd"}`."""

    name = "pi"
    display = "pi"
    read_tools = frozenset({"read"})
    write_tools = frozenset({"write", "edit"})
    shell_tools = frozenset({"bash"})
    acquire_tool = ACQUIRE_TOOL


_ALL: Final = (
    ClaudeCode(), Codex(), Gemini(), OpenCode(), KiloCode(), Copilot(), QwenCode(), Pi(), Droid(),
    Auggie(),
)  # fmt: skip
FORMATS: Final[dict[str, CliFormat]] = {fmt.name: fmt for fmt in _ALL}
"""Every CLI lockyard knows, by the name `--cli` takes."""
