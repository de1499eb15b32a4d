"""What `lockyard init` writes for each agent CLI, and what `lockyard uninstall` takes back.

- Claude Code: `.mcp.json` (`mcpServers.lockyard`), `.claude/settings.json` (the PreToolUse
  hook, the lock tools allowed, the project server approved), `CLAUDE.md`.
- Codex CLI: `.codex/config.toml` (`[mcp_servers.lockyard]`, a marked block),
  `.codex/hooks.json` (the PreToolUse hook), `AGENTS.md`.
- Gemini CLI: `.gemini/settings.json` (`mcpServers.lockyard` and the BeforeTool hook),
  `GEMINI.md`.
- OpenCode: `opencode.json` (`mcp.lockyard`), `.opencode/plugin/lockyard.js` (the guard),
  `AGENTS.md`.

Each setup edits a `Plan` (the planned text of every file it touches), so several CLIs can
share a file (AGENTS.md) and nothing is written until every file has been read and checked.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .config_files import (
    ConfigFileError,
    FileChange,
    child_list,
    child_object,
    has_block,
    json_text,
    load_json_object,
    load_toml,
    read_text,
    with_block,
    without_block,
)
from .formats import FORMATS

SERVER_KEY: Final = "lockyard"
MARKDOWN: Final = ("<!-- ", " -->")
HASH: Final = ("# ", "")
SLASHES: Final = ("// ", "")

INSTRUCTIONS: Final = """## Editing files here: lock them first (lockyard)

Other agent sessions edit this repository at the same time. lockyard's tools keep you apart:

- Before you edit files, lock them all in one call: `lock_acquire` with
  `{"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0}`. Edits and commits of files
  you have not locked are refused, with a reason that says what to do.
- Files another session holds are listed with their holder: work on the files you hold, then
  call `lock_acquire` again for the rest with a timeout (it waits for them in turn).
- If a result contains `deadlock`, your locks were released to break a cycle of waiting
  sessions: lock what you need again, then carry on.
- When you are done with files, `lock_release` them (`{"all": true}` for everything). Commit
  only files you hold.
"""


@dataclass
class Plan:
    """The planned text of each file (read once from disk); `changes()` lists what differs."""

    root: Path
    _before: dict[Path, str | None] = field(default_factory=dict)
    _after: dict[Path, str | None] = field(default_factory=dict)

    def text(self, relative: str) -> str | None:
        path = self.root / relative
        if path not in self._before:
            self._before[path] = read_text(path)
            self._after[path] = self._before[path]
        return self._after[path]

    def set(self, relative: str, text: str | None) -> None:
        self.text(relative)
        self._after[self.root / relative] = text

    def json(self, relative: str) -> dict[str, Any]:
        return load_json_object(self.root / relative, self.text(relative))

    def set_json(self, relative: str, data: dict[str, Any]) -> None:
        old = self.json(relative)
        if old != data:
            self.set(relative, json_text(self.root / relative, self.text(relative), data))

    def changes(self) -> list[FileChange]:
        return [
            FileChange(path, self._before[path], after)
            for path, after in sorted(self._after.items())
            if after != self._before[path]
        ]


@dataclass(frozen=True)
class Invocation:
    """How the agent CLIs should start lockyard."""

    command: str
    """The `lockyard` executable: a bare name looked up on PATH, or an absolute path."""
    lock_dir: str | None = None

    def serve_args(self, cli: str) -> list[str]:
        extra = [] if self.lock_dir is None else ["--lock-dir", self.lock_dir]
        return ["serve", "--cli", cli, *extra]

    def hook_command(self, cli: str) -> str:
        extra = "" if self.lock_dir is None else f" --lock-dir {shlex.quote(self.lock_dir)}"
        return f"{shlex.quote(self.command)} hook pre-tool-use --cli {cli}{extra}"


def _is_lockyard_command(command: object) -> bool:
    """A command line or argv that runs lockyard (by a bare name or a path ending in it)."""
    if isinstance(command, list):
        command = command[0] if command and isinstance(command[0], str) else ""
    if not isinstance(command, str) or not command.strip():
        return False
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        return False
    return Path(first).name == "lockyard"


def _is_lockyard_hook(hook: object) -> bool:
    return (
        isinstance(hook, dict)
        and _is_lockyard_command(hook.get("command"))
        and " hook pre-tool-use " in f"{hook.get('command')} "
    )


def _is_lockyard_group(group: object) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and bool(hooks) and all(_is_lockyard_hook(h) for h in hooks)


class CliSetup:
    """One agent CLI's setup. Subclasses say which files and entries are lockyard's."""

    name: str = ""
    instructions_file: str = ""
    markers: tuple[str, ...] = ()
    """Files or directories whose presence means the CLI is used in this repository."""

    @property
    def display(self) -> str:
        return FORMATS[self.name].display

    def detect(self, root: Path) -> bool:
        return any((root / marker).exists() for marker in self.markers)

    def install(self, plan: Plan, how: Invocation) -> None:
        self.install_server(plan, how)
        self.install_guard(plan, how)
        relative = self.instructions_file
        path = plan.root / relative
        plan.set(relative, with_block(path, plan.text(relative), INSTRUCTIONS, MARKDOWN))

    def uninstall(self, plan: Plan, others: list[CliSetup]) -> None:
        self.uninstall_server(plan)
        self.uninstall_guard(plan)
        relative = self.instructions_file
        still_needed = any(
            other.instructions_file == relative and other.installed(plan) for other in others
        )
        if not still_needed:
            plan.set(relative, without_block(plan.root / relative, plan.text(relative), MARKDOWN))

    def installed(self, plan: Plan) -> bool:
        raise NotImplementedError

    def install_server(self, plan: Plan, how: Invocation) -> None:
        raise NotImplementedError

    def uninstall_server(self, plan: Plan) -> None:
        raise NotImplementedError

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        raise NotImplementedError

    def uninstall_guard(self, plan: Plan) -> None:
        raise NotImplementedError


class _JsonServerSetup(CliSetup):
    """A CLI whose MCP servers are a JSON object of `{name: entry}` at `server_path`."""

    server_file: str = ""
    server_path: tuple[str, ...] = ()

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        raise NotImplementedError

    def _servers(self, plan: Plan, data: dict[str, Any]) -> dict[str, Any]:
        node = data
        where = ""
        for key in self.server_path:
            where = f"{where}.{key}" if where else key
            node = child_object(node, key, plan.root / self.server_file, where)
        return node

    def _entry_is_ours(self, entry: object) -> bool:
        if not isinstance(entry, dict):
            return False
        command = entry.get("command")
        args = entry.get("args")
        if isinstance(command, list):  # OpenCode: command and arguments in one list
            return _is_lockyard_command(command) and command[1:2] == ["serve"]
        return _is_lockyard_command(command) and isinstance(args, list) and args[:1] == ["serve"]

    def installed(self, plan: Plan) -> bool:
        data = plan.json(self.server_file)
        node: Any = data
        for key in self.server_path:
            node = node.get(key) if isinstance(node, dict) else None
        return isinstance(node, dict) and self._entry_is_ours(node.get(SERVER_KEY))

    def install_server(self, plan: Plan, how: Invocation) -> None:
        data = plan.json(self.server_file)
        servers = self._servers(plan, data)
        existing = servers.get(SERVER_KEY)
        if existing is not None and not self._entry_is_ours(existing):
            raise ConfigFileError(
                f"{plan.root / self.server_file} already has an MCP server named "
                f"{SERVER_KEY!r} that does not run `lockyard serve` ({_short(existing)}); "
                "rename or remove that entry, then run init again (nothing was written)"
            )
        servers[SERVER_KEY] = self.server_entry(how)
        plan.set_json(self.server_file, data)

    def uninstall_server(self, plan: Plan) -> None:
        if not self.installed(plan):
            return
        data = plan.json(self.server_file)
        del self._servers(plan, data)[SERVER_KEY]
        _prune(data, self.server_path)
        plan.set_json(self.server_file, data)


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _prune(data: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Drop the objects and lists along `keys` that lockyard's removal left empty."""
    if not keys or not isinstance(data.get(keys[0]), dict | list):
        return
    child = data[keys[0]]
    if isinstance(child, dict):
        _prune(child, keys[1:])
    if not child:
        del data[keys[0]]


class _HookListSetup(_JsonServerSetup):
    """A CLI whose hooks are `{"hooks": {EVENT: [{"matcher", "hooks": [{"type": "command",
    "command"}]}]}}` in `hook_file` (Claude Code, Codex CLI, Gemini CLI)."""

    hook_file: str = ""
    hook_event: str = "PreToolUse"
    matcher: str = ""

    def hook_group(self, how: Invocation) -> dict[str, Any]:
        return {
            "matcher": self.matcher,
            "hooks": [{"type": "command", "command": how.hook_command(self.name)}],
        }

    def _groups(self, plan: Plan, data: dict[str, Any]) -> list[Any]:
        path = plan.root / self.hook_file
        hooks = child_object(data, "hooks", path, "hooks")
        return child_list(hooks, self.hook_event, path, f"hooks.{self.hook_event}")

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        data = plan.json(self.hook_file)
        groups = self._groups(plan, data)
        groups[:] = [group for group in groups if not _is_lockyard_group(group)]
        groups.append(self.hook_group(how))
        plan.set_json(self.hook_file, data)

    def uninstall_guard(self, plan: Plan) -> None:
        data = plan.json(self.hook_file)
        hooks = data.get("hooks")
        groups = hooks.get(self.hook_event) if isinstance(hooks, dict) else None
        if not isinstance(groups, list) or not any(_is_lockyard_group(g) for g in groups):
            return
        groups[:] = [group for group in groups if not _is_lockyard_group(group)]
        _prune(data, ("hooks", self.hook_event))
        plan.set_json(self.hook_file, data)


LOCK_TOOLS: Final = ("mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release")


class ClaudeCodeSetup(_HookListSetup):
    name = "claude-code"
    instructions_file = "CLAUDE.md"
    markers = (".mcp.json", ".claude", "CLAUDE.md")
    server_file = ".mcp.json"
    server_path = ("mcpServers",)
    hook_file = ".claude/settings.json"
    matcher = "Write|Edit|MultiEdit|NotebookEdit|Bash"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name)}

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        super().install_guard(plan, how)
        # The lock tools are harmless: allow them (no prompt per call), and approve the
        # project's lockyard server (a project .mcp.json server is otherwise held back).
        data = plan.json(self.hook_file)
        path = plan.root / self.hook_file
        allow = child_list(child_object(data, "permissions", path, "permissions"), "allow",
                           path, "permissions.allow")  # fmt: skip
        allow.extend(tool for tool in LOCK_TOOLS if tool not in allow)
        enabled = child_list(data, "enabledMcpjsonServers", path, "enabledMcpjsonServers")
        if SERVER_KEY not in enabled:
            enabled.append(SERVER_KEY)
        plan.set_json(self.hook_file, data)

    def uninstall_guard(self, plan: Plan) -> None:
        super().uninstall_guard(plan)
        data = plan.json(self.hook_file)
        permissions = data.get("permissions")
        allow = permissions.get("allow") if isinstance(permissions, dict) else None
        if isinstance(allow, list):
            allow[:] = [entry for entry in allow if entry not in LOCK_TOOLS]
            _prune(data, ("permissions", "allow"))
        enabled = data.get("enabledMcpjsonServers")
        if isinstance(enabled, list) and SERVER_KEY in enabled:
            enabled.remove(SERVER_KEY)
            _prune(data, ("enabledMcpjsonServers",))
        plan.set_json(self.hook_file, data)


class GeminiSetup(_HookListSetup):
    name = "gemini"
    instructions_file = "GEMINI.md"
    markers = (".gemini", "GEMINI.md")
    server_file = ".gemini/settings.json"
    server_path = ("mcpServers",)
    hook_file = ".gemini/settings.json"
    hook_event = "BeforeTool"
    matcher = "write_file|replace|run_shell_command"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"command": how.command, "args": how.serve_args(self.name)}

    def hook_group(self, how: Invocation) -> dict[str, Any]:
        group = super().hook_group(how)
        group["hooks"][0]["name"] = "lockyard-guard"
        return group


class CodexSetup(_HookListSetup):
    """Codex reads MCP servers from TOML: lockyard's table is a marked block there."""

    name = "codex"
    instructions_file = "AGENTS.md"
    markers = (".codex",)
    server_file = ".codex/config.toml"
    hook_file = ".codex/hooks.json"
    matcher = "apply_patch|Edit|Write|Bash"

    def installed(self, plan: Plan) -> bool:
        return has_block(plan.text(self.server_file), HASH)

    def install_server(self, plan: Plan, how: Invocation) -> None:
        path = plan.root / self.server_file
        text = plan.text(self.server_file)
        config = load_toml(path, text)
        servers = config.get("mcp_servers")
        if isinstance(servers, dict) and SERVER_KEY in servers and not has_block(text, HASH):
            raise ConfigFileError(
                f"{path} already has an MCP server named {SERVER_KEY!r} that lockyard did not "
                "write; rename or remove [mcp_servers.lockyard], then run init again "
                "(nothing was written)"
            )
        args = ", ".join(_toml_string(arg) for arg in how.serve_args(self.name))
        # The lock tools are harmless: approved, so no approval prompt (and no refusal in
        # `codex exec`, whose approval policy is "never") stands between the agent and them.
        block = "\n".join([
            f"[mcp_servers.{SERVER_KEY}]",
            f"command = {_toml_string(how.command)}",
            f"args = [{args}]",
            'default_tools_approval_mode = "approve"',
            "",
        ])  # fmt: skip
        new_text = with_block(path, text, block, HASH)
        load_toml(path, new_text)  # a table defined twice would make Codex refuse the file
        plan.set(self.server_file, new_text)

    def uninstall_server(self, plan: Plan) -> None:
        path = plan.root / self.server_file
        plan.set(self.server_file, without_block(path, plan.text(self.server_file), HASH))


def _toml_string(value: str) -> str:
    # A TOML basic string accepts JSON's escapes for every character JSON escapes.
    return json.dumps(value)


OPENCODE_PLUGIN: Final = (
    "`lockyard init opencode` wrote this file; `lockyard uninstall opencode` removes it."
)


class OpenCodeSetup(_JsonServerSetup):
    name = "opencode"
    instructions_file = "AGENTS.md"
    markers = ("opencode.json", ".opencode")
    server_file = "opencode.json"
    server_path = ("mcp",)
    plugin_file = ".opencode/plugin/lockyard.js"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "local", "command": [how.command, *how.serve_args(self.name)],
                "enabled": True}  # fmt: skip

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        current = plan.text(self.plugin_file)
        if current is not None and OPENCODE_PLUGIN not in current:
            raise ConfigFileError(
                f"{plan.root / self.plugin_file} exists and lockyard did not write it; move it "
                "away, then run init again (nothing was written)"
            )
        plan.set(self.plugin_file, opencode_plugin(how))

    def uninstall_guard(self, plan: Plan) -> None:
        current = plan.text(self.plugin_file)
        if current is not None and OPENCODE_PLUGIN in current:
            plan.set(self.plugin_file, None)


def opencode_plugin(how: Invocation) -> str:
    """The OpenCode plugin: each write or shell call goes through `lockyard hook` first; a
    deny (or a guard that cannot run) throws, which makes OpenCode refuse the call."""

    fmt = FORMATS["opencode"]
    tools = sorted(fmt.write_tools | fmt.shell_tools)
    args = ["hook", "pre-tool-use", "--cli", "opencode"]
    if how.lock_dir is not None:
        args += ["--lock-dir", how.lock_dir]
    return f"""// {OPENCODE_PLUGIN}
// Before each write or shell call, ask lockyard whether this session holds the files.
import {{ spawnSync }} from "node:child_process";

const COMMAND = {json.dumps(how.command)};
const ARGS = {json.dumps(args)};
const GUARDED = new Set({json.dumps(tools)});

export const LockyardGuard = async ({{ directory }}) => ({{
  "tool.execute.before": async (input, output) => {{
    if (!GUARDED.has(input.tool)) return;
    const call = {{ tool_name: input.tool, tool_input: output.args ?? {{}}, cwd: directory }};
    const payload = JSON.stringify(call);
    const done = spawnSync(COMMAND, ARGS, {{ input: payload, encoding: "utf8" }});
    if (done.error || done.status !== 0) {{
      const why = done.error ?? done.stderr;
      throw new Error(`lockyard's guard did not run (${{why}}), so this call is refused`);
    }}
    const answer = done.stdout.trim() ? JSON.parse(done.stdout) : {{}};
    if (answer.decision === "deny") throw new Error(answer.reason);
  }},
}});
"""


SETUPS: Final[dict[str, CliSetup]] = {
    setup.name: setup for setup in (ClaudeCodeSetup(), CodexSetup(), OpenCodeSetup(), GeminiSetup())
}
"""Every CLI `lockyard init` can set up, in the order it sets them up."""
