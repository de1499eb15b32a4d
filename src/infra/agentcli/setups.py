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
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .config_files import (
    MARKDOWN_COMMENT,
    MISSING,
    NOTHING_WRITTEN,
    SLASH_COMMENT,
    ConfigFileError,
    Plan,
    check_encodable,
    is_whole_block,
    load_toml,
    toml_has_block,
    toml_string,
    toml_text_block,
    toml_without_block,
    with_block,
    without_block,
)
from .formats import FORMATS
from .json_edit import json_equal

SERVER_KEY: Final = "lockyard"

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


@dataclass(frozen=True)
class Invocation:
    """How the agent CLIs should start lockyard."""

    command: str
    """The `lockyard` executable: a bare name looked up on PATH, or an absolute path."""
    lock_dir: str | None = None
    ipc: str | None = None
    """Inside a sandbox: its IPC folder. The server is `serve --ipc` and the hook asks the
    host through the folder (no lock directory there, and no network)."""

    def __post_init__(self) -> None:
        check_encodable("--command", self.command)
        if self.lock_dir is not None:
            check_encodable("--lock-dir", self.lock_dir)
        if self.ipc is not None:
            check_encodable("--ipc", self.ipc)

    def serve_args(self, cli: str) -> list[str]:
        if self.ipc is not None:
            return ["serve", "--ipc", self.ipc]
        extra = [] if self.lock_dir is None else ["--lock-dir", self.lock_dir]
        return ["serve", "--cli", cli, *extra]

    def hook_args(self, cli: str) -> list[str]:
        if self.ipc is not None:
            extra = ["--ipc", self.ipc]
        else:
            extra = [] if self.lock_dir is None else ["--lock-dir", self.lock_dir]
        return ["hook", "pre-tool-use", "--cli", cli, *extra]

    def hook_command(self, cli: str) -> str:
        return shlex.join([self.command, *self.hook_args(cli)])

    @classmethod
    def from_argv(cls, argv: list[str], expected: list[str]) -> Invocation | None:
        """The invocation whose arguments `argv` (after the command) are `expected`, with
        `--lock-dir DIR`, `--ipc DIR` or nothing after them; None when `argv` is not of that
        shape."""
        if len(argv) < 1 + len(expected) or argv[1 : 1 + len(expected)] != expected:
            return None
        rest = argv[1 + len(expected) :]
        if rest and (len(rest) != 2 or rest[0] not in ("--lock-dir", "--ipc")):
            return None
        option = dict([rest]) if rest else {}
        try:
            return cls(argv[0], option.get("--lock-dir"), option.get("--ipc"))
        except ConfigFileError:
            return None

    @classmethod
    def from_hook_command(cls, command: object, cli: str) -> Invocation | None:
        """The invocation that `hook_command(cli)` turned into `command`, if any did."""
        if not isinstance(command, str):
            return None
        try:
            argv = shlex.split(command)
        except ValueError:
            return None
        found = cls.from_argv(argv, ["hook", "pre-tool-use", "--cli", cli])
        return found if found is not None and found.hook_command(cli) == command else None

    @classmethod
    def from_serve_argv(cls, argv: list[str], cli: str) -> Invocation | None:
        """The invocation whose `serve_args(cli)` (after the command) are `argv[1:]`."""
        found = cls.from_argv(argv, ["serve", "--cli", cli]) or cls.from_argv(argv, ["serve"])
        if found is None or [found.command, *found.serve_args(cli)] != argv:
            return None
        return found


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


class CliSetup:
    """One agent CLI's setup. Subclasses say which files and entries are lockyard's.

    An entry is lockyard's when it is exactly what `init` writes for some command and lock
    directory (read back from the entry itself): entries a person wrote or changed are theirs.
    """

    name: str = ""
    instructions_file: str = ""
    markers: tuple[str, ...] = ()
    """Files or directories whose presence means the CLI is used in this repository."""

    @property
    def display(self) -> str:
        return FORMATS[self.name].display

    def detect(self, root: Path) -> bool:
        return any(os.path.lexists(root / marker) for marker in self.markers)

    def install(self, plan: Plan, how: Invocation) -> None:
        self.install_server(plan, how)
        self.install_guard(plan, how)
        relative = self.instructions_file
        path = plan.path(relative)
        plan.set(relative, with_block(path, plan.text(relative), INSTRUCTIONS, MARKDOWN_COMMENT))

    def uninstall(self, plan: Plan, others: list[CliSetup]) -> None:
        self.uninstall_server(plan)
        self.uninstall_guard(plan)
        relative = self.instructions_file
        still_needed = any(
            plan.same_file(other.instructions_file, relative) and other.installed(plan)
            for other in others
        )
        if not still_needed:
            path = plan.path(relative)
            plan.set(relative, without_block(path, plan.text(relative), MARKDOWN_COMMENT))

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
    comments: bool = False
    """The CLI reads its JSON files with comments allowed (so lockyard accepts them too)."""

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        raise NotImplementedError

    def invocation_of(self, entry: object) -> Invocation | None:
        """The invocation `server_entry` made `entry` from, if it is one of lockyard's."""
        if not isinstance(entry, dict):
            return None
        command, args = entry.get("command"), _strings(entry.get("args"))
        if not isinstance(command, str) or args is None:
            return None
        return Invocation.from_serve_argv([command, *args], self.name)

    def _entry_is_ours(self, entry: object) -> bool:
        how = self.invocation_of(entry)
        return how is not None and json_equal(self.server_entry(how), entry)

    @property
    def _server_keys(self) -> tuple[str, ...]:
        return (*self.server_path, SERVER_KEY)

    def installed(self, plan: Plan) -> bool:
        document = plan.read_json(self.server_file, comments=self.comments)
        return self._entry_is_ours(document.get(self._server_keys))

    def install_server(self, plan: Plan, how: Invocation) -> None:
        with plan.json(self.server_file, comments=self.comments) as document:
            existing = document.get(self._server_keys)
            if existing is not MISSING and not self._entry_is_ours(existing):
                raise ConfigFileError(
                    f"{plan.path(self.server_file)} already has an MCP server named "
                    f"{SERVER_KEY!r} that is not the one `lockyard init` writes "
                    f"({_short(existing)}); rename or remove that entry, then run init again "
                    f"{NOTHING_WRITTEN}"
                )
            document.put(self._server_keys, self.server_entry(how))

    def uninstall_server(self, plan: Plan) -> None:
        with plan.json(self.server_file, comments=self.comments) as document:
            while self._entry_is_ours(document.get(self._server_keys)):
                document.delete(self._server_keys)


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


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

    def _group_is_ours(self, group: object) -> bool:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list) or len(hooks) != 1 or not isinstance(hooks[0], dict):
            return False
        how = Invocation.from_hook_command(hooks[0].get("command"), self.name)
        return how is not None and json_equal(self.hook_group(how), group)

    @property
    def _hook_keys(self) -> tuple[str, ...]:
        return ("hooks", self.hook_event)

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        with plan.json(self.hook_file, comments=self.comments) as document:
            document.put_item(self._hook_keys, self.hook_group(how), self._group_is_ours)

    def uninstall_guard(self, plan: Plan) -> None:
        with plan.json(self.hook_file, comments=self.comments) as document:
            document.delete_items(self._hook_keys, self._group_is_ours)


LOCK_TOOLS: Final = ("mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release")


def _is(expected: str) -> Callable[[object], bool]:
    return lambda item: isinstance(item, str) and item == expected


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
        with plan.json(self.hook_file) as document:
            for tool in LOCK_TOOLS:
                document.put_item(("permissions", "allow"), tool, _is(tool))
            document.put_item(("enabledMcpjsonServers",), SERVER_KEY, _is(SERVER_KEY))

    def uninstall_guard(self, plan: Plan) -> None:
        super().uninstall_guard(plan)
        with plan.json(self.hook_file) as document:
            for tool in LOCK_TOOLS:
                document.delete_items(("permissions", "allow"), _is(tool))
            document.delete_items(("enabledMcpjsonServers",), _is(SERVER_KEY))


class GeminiSetup(_HookListSetup):
    name = "gemini"
    instructions_file = "GEMINI.md"
    markers = (".gemini", "GEMINI.md")
    server_file = ".gemini/settings.json"
    server_path = ("mcpServers",)
    comments = True  # Gemini CLI strips comments before it parses its settings
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
        return toml_has_block(plan.path(self.server_file), plan.text(self.server_file))

    def install_server(self, plan: Plan, how: Invocation) -> None:
        path = plan.path(self.server_file)
        text = plan.text(self.server_file)
        servers = load_toml(path, text).get("mcp_servers")
        if isinstance(servers, dict) and SERVER_KEY in servers and not toml_has_block(path, text):
            raise ConfigFileError(
                f"{path} already has an MCP server named {SERVER_KEY!r} that lockyard did not "
                "write; rename or remove [mcp_servers.lockyard], then run init again "
                f"{NOTHING_WRITTEN}"
            )
        args = ", ".join(toml_string(arg) for arg in how.serve_args(self.name))
        # The lock tools are harmless: approved, so no approval prompt (and no refusal in
        # `codex exec`, whose approval policy is "never") stands between the agent and them.
        block = "\n".join([
            f"[mcp_servers.{SERVER_KEY}]",
            f"command = {toml_string(how.command)}",
            f"args = [{args}]",
            'default_tools_approval_mode = "approve"',
        ])  # fmt: skip
        plan.set(self.server_file, toml_text_block(path, text, block))

    def uninstall_server(self, plan: Plan) -> None:
        path = plan.path(self.server_file)
        plan.set(self.server_file, toml_without_block(path, plan.text(self.server_file)))


OPENCODE_PLUGIN: Final = (
    "`lockyard init opencode` wrote this file; `lockyard uninstall opencode` removes it."
)


class OpenCodeSetup(_JsonServerSetup):
    name = "opencode"
    instructions_file = "AGENTS.md"
    markers = ("opencode.json", ".opencode")
    server_file = "opencode.json"
    server_path = ("mcp",)
    comments = True  # OpenCode reads its config as JSONC
    plugin_file = ".opencode/plugin/lockyard.js"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "local", "command": [how.command, *how.serve_args(self.name)],
                "enabled": True}  # fmt: skip

    def invocation_of(self, entry: object) -> Invocation | None:
        argv = _strings(entry.get("command")) if isinstance(entry, dict) else None
        if not argv:
            return None
        return Invocation.from_serve_argv(argv, self.name)

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        path = plan.path(self.plugin_file)
        current = plan.text(self.plugin_file)
        if current is not None and not is_whole_block(path, current, SLASH_COMMENT):
            raise ConfigFileError(
                f"{path} exists and lockyard did not write it; move it away, then run init "
                f"again {NOTHING_WRITTEN}"
            )
        plan.set(self.plugin_file, with_block(path, current, opencode_plugin(how), SLASH_COMMENT))

    def uninstall_guard(self, plan: Plan) -> None:
        path = plan.path(self.plugin_file)
        current = plan.text(self.plugin_file)
        if current is not None and is_whole_block(path, current, SLASH_COMMENT):
            plan.set(self.plugin_file, None)


def opencode_plugin(how: Invocation) -> str:
    """The OpenCode plugin: each write or shell call goes through `lockyard hook` first; a
    deny (or a guard that cannot run) throws, which makes OpenCode refuse the call."""

    fmt = FORMATS["opencode"]
    tools = sorted(fmt.write_tools | fmt.shell_tools)
    args = how.hook_args("opencode")
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
