"""What `lockyard init` writes for each agent CLI, and what `lockyard uninstall` takes back.

- Claude Code: `.mcp.json` (`mcpServers.lockyard`), `.claude/settings.json` (the PreToolUse
  hook, over HTTP to the lock directory's guard, `onFailure: "block"`; the lock tools
  allowed; the project server approved), `CLAUDE.md`.
- Codex CLI: `.codex/config.toml` (`[mcp_servers.lockyard]`, a marked block),
  `.codex/hooks.json` (the PreToolUse hook), `AGENTS.md`.
- Gemini CLI: `.gemini/settings.json` (`mcpServers.lockyard` and the BeforeTool hook),
  `GEMINI.md`.
- OpenCode: `opencode.json` (`mcp.lockyard`), `.opencode/plugin/lockyard.js` (the guard),
  `AGENTS.md`. Kilo Code (an OpenCode fork): the same in `kilo.json` and `.kilo/plugin/`.
- GitHub Copilot CLI: `.github/mcp.json` (`mcpServers.lockyard`), `.github/hooks/lockyard.json`
  (a hook file of lockyard's own: the preToolUse hook), `AGENTS.md`.
- Qwen Code: `.qwen/settings.json` (`mcpServers.lockyard` and the PreToolUse hook), `QWEN.md`.
- Factory's droid: `.factory/mcp.json` (`mcpServers.lockyard`), `.factory/settings.json` (the
  PreToolUse hook), `AGENTS.md`.
- pi: `.pi/extensions/lockyard.ts` (starts `lockyard serve` and offers its lock tools, and
  guards writes and shell calls: pi has neither MCP nor command hooks), `AGENTS.md`.
- Auggie: `.augment/settings.json` (`mcpServers.lockyard` and the PreToolUse hook; unproven:
  no Auggie ran here), `AGENTS.md`.
- Crush: `crush.json` (`mcp.lockyard`), `AGENTS.md`: the lock tools only, no guard
  (docs/clis/crush.md).

Each setup edits a `Plan` (the planned text of every file it touches), so several CLIs can
share a file (AGENTS.md) and nothing is written until every file has been read and checked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
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
from .guard_address import COMMAND_VIA, HOOK_PATH, HOST, guard_port, hook_url
from .hook_timeouts import CLI_HOOK_TIMEOUT_SECONDS, HOOK_DEADLINE_SECONDS, late_reason
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


HTTP_HOOK_TIMEOUT: Final = 30
"""Seconds Claude Code gives the guard's answer (a shell call's `git commit` check included);
a guard that takes longer refuses the call (`onFailure: "block"`)."""


@dataclass(frozen=True)
class Invocation:
    """How the agent CLIs should start lockyard."""

    command: str
    """The `lockyard` executable: a bare name looked up on PATH, or an absolute path."""
    lock_dir: str | None = None
    ipc: str | None = None
    """Inside a sandbox: its IPC folder. The server is `serve --ipc` and the hook asks the
    host through the folder (no lock directory there, and no network)."""
    guard_port: int | None = None
    """The guard's port when given explicitly (else each process derives it)."""
    default_lock_dir: str = ""
    """The lock directory the commands will use when `lock_dir` is None (for the URL of an
    HTTP hook, which names the guard's port)."""

    def __post_init__(self) -> None:
        check_encodable("--command", self.command)
        if self.lock_dir is not None:
            check_encodable("--lock-dir", self.lock_dir)
        if self.ipc is not None:
            check_encodable("--ipc", self.ipc)

    def _extra_args(self) -> list[str]:
        extra = [] if self.lock_dir is None else ["--lock-dir", self.lock_dir]
        return extra + ([] if self.guard_port is None else ["--guard-port", str(self.guard_port)])

    def serve_args(self, cli: str) -> list[str]:
        if self.ipc is not None:
            return ["serve", "--ipc", self.ipc]
        return ["serve", "--cli", cli, *self._extra_args()]

    def hook_args(self, cli: str) -> list[str]:
        if self.ipc is not None:
            return ["hook", "pre-tool-use", "--cli", cli, "--ipc", self.ipc]
        return ["hook", "pre-tool-use", "--cli", cli, *self._extra_args()]

    def hook_command(self, cli: str) -> str:
        return shlex.join([self.command, *self.hook_args(cli)])

    def hook_url(self, cli: str) -> str:
        """The URL of `cli`'s HTTP hook: the guard of the lock directory the commands use."""
        directory = self.lock_dir or self.default_lock_dir
        return hook_url(directory, cli, guard_port(directory, self.guard_port))

    def guard_url(self, cli: str) -> str | None:
        """Where a plugin of `cli` asks the guard as its command hook would (the answer is
        what the hook would print); None in a sandbox, where no guard listens."""
        return None if self.ipc is not None else f"{self.hook_url(cli)}&via={COMMAND_VIA}"

    @classmethod
    def from_argv(cls, argv: list[str], expected: list[str]) -> Invocation | None:
        """The invocation whose arguments `argv` (after the command) are `expected`, with
        `--ipc DIR`, or `--lock-dir DIR` and `--guard-port PORT` (each optional), or nothing
        after them; None when `argv` is not of that shape."""
        if len(argv) < 1 + len(expected) or argv[1 : 1 + len(expected)] != expected:
            return None
        rest = argv[1 + len(expected) :]
        lock_dir = ipc = port = None
        if rest[:1] == ["--ipc"] and len(rest) == 2:
            ipc, rest = rest[1], []
        if rest[:1] == ["--lock-dir"] and len(rest) >= 2:
            lock_dir, rest = rest[1], rest[2:]
        if rest[:1] == ["--guard-port"] and len(rest) >= 2 and rest[1].isdigit():
            port, rest = int(rest[1]), rest[2:]
        if rest:
            return None
        try:
            return cls(argv[0], lock_dir, ipc=ipc, guard_port=port)
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
    executables: tuple[str, ...] = ()
    """Command names the CLI installs (found on PATH: the CLI is installed on this machine)."""
    guarded: bool = True
    """init writes a guard that refuses unlocked writes (False: the lock tools only)."""

    @property
    def display(self) -> str:
        return FORMATS[self.name].display

    def detect(self, root: Path) -> bool:
        return self.found_in(root) is not None

    def found_in(self, root: Path) -> str | None:
        """The first of this CLI's files the repository has (None: none)."""
        return next((m for m in self.markers if os.path.lexists(root / m)), None)

    def found_on_path(self) -> str | None:
        """Where PATH finds this CLI's command (None: not installed there)."""
        return next((found for name in self.executables if (found := shutil.which(name))), None)

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


class JsonServerSetup(CliSetup):
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


class _HookListSetup(JsonServerSetup):
    """A CLI whose hooks are `{"hooks": {EVENT: [{"matcher", "hooks": [{"type": "command",
    "command"}]}]}}` in `hook_file` (Claude Code, Codex CLI, Gemini CLI)."""

    hook_file: str = ""
    hook_event: str = "PreToolUse"
    matcher: str = ""
    hook_timeout: int = CLI_HOOK_TIMEOUT_SECONDS
    """The command hook's `timeout`, in this CLI's unit (Claude Code and Codex: seconds)."""

    def hook_group(self, how: Invocation) -> dict[str, Any]:
        hook = {"type": "command", "command": how.hook_command(self.name),
                "timeout": self.hook_timeout}  # fmt: skip
        return {"matcher": self.matcher, "hooks": [hook]}

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


LOCK_TOOLS: Final = (
    "mcp__lockyard__lock_acquire",
    "mcp__lockyard__lock_release",
    "mcp__lockyard__lock_status",
)
_HTTP_HOOK_URL: Final = re.compile(
    re.escape(f"http://{HOST}:")
    + r"[0-9]{1,5}"
    + re.escape(f"{HOOK_PATH}?cli=claude-code&dir=")
    + r"[0-9a-f]{8}"
)


def _is(expected: str) -> Callable[[object], bool]:
    return lambda item: isinstance(item, str) and item == expected


_GIT_TURN_RULE_END: Final = " git-turn:*)"


def git_turn_rules(command: str) -> tuple[str, ...]:
    """Claude Code allow-list rules for the prefix the shell guard asks a git line to start
    with. Without one, Claude Code asks a person before running it, and `claude -p` refuses
    it; it only waits for git's turn. The guard names `lockyard` when that is the one on
    PATH, else its full path: both forms."""
    forms = dict.fromkeys(("lockyard", shlex.quote(command)))
    return tuple(f"Bash({form}{_GIT_TURN_RULE_END}" for form in forms)


def _is_git_turn_rule(item: object) -> bool:
    return isinstance(item, str) and item.startswith("Bash(") and item.endswith(_GIT_TURN_RULE_END)


class ClaudeCodeSetup(_HookListSetup):
    name = "claude-code"
    instructions_file = "CLAUDE.md"
    markers = (".mcp.json", ".claude", "CLAUDE.md")
    executables = ("claude",)
    server_file = ".mcp.json"
    server_path = ("mcpServers",)
    hook_file = ".claude/settings.json"
    matcher = "Read|Write|Edit|MultiEdit|NotebookEdit|Bash"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name)}

    def hook_group(self, how: Invocation) -> dict[str, Any]:
        """An HTTP hook: the session's own lockyard servers answer it in about a millisecond
        (a command hook starts a Python process per tool call); unreachable, it refuses.
        In a sandbox (`--ipc`) no server listens: the command hook asks the host instead."""
        if how.ipc is not None:
            return super().hook_group(how)
        hook = {"type": "http", "url": how.hook_url(self.name), "timeout": HTTP_HOOK_TIMEOUT,
                "onFailure": "block"}  # fmt: skip
        return {"matcher": self.matcher, "hooks": [hook]}

    def _group_is_ours(self, group: object) -> bool:
        """Exactly the group `hook_group` writes, for whatever lock directory and port (or a
        sandbox's command hook)."""
        if super()._group_is_ours(group):
            return True
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list) or len(hooks) != 1 or not isinstance(hooks[0], dict):
            return False
        url = hooks[0].get("url")
        if not isinstance(url, str) or _HTTP_HOOK_URL.fullmatch(url) is None:
            return False
        expected = {"matcher": self.matcher, "hooks": [{"type": "http", "url": url,
                    "timeout": HTTP_HOOK_TIMEOUT, "onFailure": "block"}]}  # fmt: skip
        return json_equal(expected, group)

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        super().install_guard(plan, how)
        # The lock tools and the git-turn prefix are harmless: allow them (no prompt per
        # call), and approve the project's lockyard server (a project .mcp.json server is
        # otherwise held back).
        with plan.json(self.hook_file) as document:
            for tool in (*LOCK_TOOLS, *git_turn_rules(how.command)):
                document.put_item(("permissions", "allow"), tool, _is(tool))
            document.put_item(("enabledMcpjsonServers",), SERVER_KEY, _is(SERVER_KEY))

    def uninstall_guard(self, plan: Plan) -> None:
        super().uninstall_guard(plan)
        with plan.json(self.hook_file) as document:
            for tool in LOCK_TOOLS:
                document.delete_items(("permissions", "allow"), _is(tool))
            document.delete_items(("permissions", "allow"), _is_git_turn_rule)
            document.delete_items(("enabledMcpjsonServers",), _is(SERVER_KEY))


class GeminiSetup(_HookListSetup):
    name = "gemini"
    instructions_file = "GEMINI.md"
    markers = (".gemini", "GEMINI.md")
    executables = ("gemini",)
    server_file = ".gemini/settings.json"
    server_path = ("mcpServers",)
    comments = True  # Gemini CLI strips comments before it parses its settings
    hook_file = ".gemini/settings.json"
    hook_event = "BeforeTool"
    matcher = "read_file|write_file|replace|run_shell_command"
    hook_timeout = CLI_HOOK_TIMEOUT_SECONDS * 1000  # Gemini CLI counts milliseconds

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
    executables = ("codex",)
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


class OpenCodeSetup(JsonServerSetup):
    name = "opencode"
    instructions_file = "AGENTS.md"
    markers: tuple[str, ...] = ("opencode.json", ".opencode")
    executables: tuple[str, ...] = ("opencode",)
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
        plugin = opencode_plugin(self.name, how)
        plan.set(self.plugin_file, with_block(path, current, plugin, SLASH_COMMENT))

    def uninstall_guard(self, plan: Plan) -> None:
        path = plan.path(self.plugin_file)
        current = plan.text(self.plugin_file)
        if current is not None and is_whole_block(path, current, SLASH_COMMENT):
            plan.set(self.plugin_file, None)


def opencode_plugin(cli: str, how: Invocation) -> str:
    """The OpenCode (or Kilo) plugin: each write or shell call goes through `lockyard hook`
    first; a deny (or a guard that cannot run) throws, which makes the CLI refuse the call."""
    return render_plugin("opencode.js", cli, how)


def pi_extension(how: Invocation) -> str:
    """The pi extension: starts `lockyard serve` and offers its lock tools as pi tools; each
    write or shell call goes through `lockyard hook` first and is blocked on a deny."""
    return render_plugin("pi.ts", "pi", how)


def _owned_by(cli: str) -> str:
    return f"`lockyard init {cli}` wrote this file; `lockyard uninstall {cli}` removes it."


def render_plugin(template: str, cli: str, how: Invocation) -> str:
    """A plugin file from `plugins/<template>`, its `__NAME__` constants filled in."""
    fmt = FORMATS[cli]
    plugins = files(__package__) / "plugins"
    text = plugins.joinpath(template).read_text(encoding="utf-8")
    # First, so that its own `__NAME__` constants are filled in below too.
    text = text.replace("__ASK_GUARD__\n", plugins.joinpath("_ask_guard.js").read_text("utf-8"))
    values = {
        "__OWNED__": _owned_by(cli),
        "__COMMAND__": json.dumps(how.command),
        "__SERVE_ARGS__": json.dumps(how.serve_args(cli)),
        "__HOOK_ARGS__": json.dumps(how.hook_args(cli)),
        "__GUARD_URL__": json.dumps(how.guard_url(cli)),
        "__GUARDED__": json.dumps(sorted(fmt.read_tools | fmt.write_tools | fmt.shell_tools)),
        "__GUARD_DEADLINE_MS__": str(round(HOOK_DEADLINE_SECONDS * 1000)),
        "__HOOK_TIMEOUT_MS__": str(CLI_HOOK_TIMEOUT_SECONDS * 1000),
        "__LATE_REASON__": json.dumps(late_reason(HOOK_DEADLINE_SECONDS)),
    }
    for name, value in values.items():
        text = text.replace(name, value)
    return text


class KiloSetup(OpenCodeSetup):
    """Kilo Code's CLI is an OpenCode fork: its own file names, the same plugin hook."""

    name = "kilo"
    markers = ("kilo.json", "kilo.jsonc", ".kilo", ".kilocode")
    executables = ("kilo", "kilocode")
    server_file = "kilo.json"
    plugin_file = ".kilo/plugin/lockyard.js"


class _OwnedFileSetup(CliSetup):
    """A CLI whose guard is a file of lockyard's own, written whole as one marked block."""

    owned_file: str = ""
    style = SLASH_COMMENT

    def owned_text(self, how: Invocation) -> str:
        raise NotImplementedError

    def _is_ours(self, plan: Plan) -> bool:
        text = plan.text(self.owned_file)
        return text is not None and is_whole_block(plan.path(self.owned_file), text, self.style)

    def install_owned(self, plan: Plan, how: Invocation) -> None:
        path = plan.path(self.owned_file)
        current = plan.text(self.owned_file)
        if current is not None and not self._is_ours(plan):
            raise ConfigFileError(
                f"{path} exists and lockyard did not write it; move it away, then run init "
                f"again {NOTHING_WRITTEN}"
            )
        plan.set(self.owned_file, with_block(path, current, self.owned_text(how), self.style))

    def uninstall_owned(self, plan: Plan) -> None:
        if self._is_ours(plan):
            plan.set(self.owned_file, None)


class PiSetup(_OwnedFileSetup):
    """pi has no MCP and no command hooks: one extension of lockyard's starts `lockyard serve`,
    offers its lock tools as pi tools, and asks `lockyard hook` before each write or shell
    call (pi loads `.pi/extensions/*.ts` on its own)."""

    name = "pi"
    instructions_file = "AGENTS.md"
    markers = (".pi",)
    executables = ("pi",)
    owned_file = ".pi/extensions/lockyard.ts"

    def owned_text(self, how: Invocation) -> str:
        return pi_extension(how)

    def installed(self, plan: Plan) -> bool:
        return self._is_ours(plan)

    def install_server(self, plan: Plan, how: Invocation) -> None:
        self.install_owned(plan, how)

    def uninstall_server(self, plan: Plan) -> None:
        self.uninstall_owned(plan)

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        pass  # the extension is both the lock tools and the guard

    def uninstall_guard(self, plan: Plan) -> None:
        pass


class CopilotSetup(JsonServerSetup):
    """GitHub Copilot CLI: the server in `.github/mcp.json`; the guard a `preToolUse` hook in
    a hook file of lockyard's own (Copilot reads every `.github/hooks/*.json`)."""

    name = "copilot"
    instructions_file = "AGENTS.md"
    markers = (".github/mcp.json", ".github/hooks", ".github/copilot-instructions.md")
    executables = ("copilot",)
    server_file = ".github/mcp.json"
    server_path = ("mcpServers",)
    hook_file = ".github/hooks/lockyard.json"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name),
                "tools": ["*"]}  # fmt: skip

    def hook_text(self, how: Invocation) -> str:
        hook = {
            "type": "command",
            "bash": how.hook_command(self.name),
            "timeoutSec": CLI_HOOK_TIMEOUT_SECONDS,
        }
        return json.dumps({"version": 1, "hooks": {"preToolUse": [hook]}}, indent=2) + "\n"

    def _hook_file_is_ours(self, text: str | None) -> bool:
        try:
            data = json.loads(text or "")
            command = data["hooks"]["preToolUse"][0]["bash"]
        except (ValueError, KeyError, IndexError, TypeError):
            return False
        how = Invocation.from_hook_command(command, self.name)
        return how is not None and self.hook_text(how) == text

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        current = plan.text(self.hook_file)
        if current is not None and not self._hook_file_is_ours(current):
            raise ConfigFileError(
                f"{plan.path(self.hook_file)} exists and lockyard did not write it; move it "
                f"away, then run init again {NOTHING_WRITTEN}"
            )
        plan.set(self.hook_file, self.hook_text(how))

    def uninstall_guard(self, plan: Plan) -> None:
        if self._hook_file_is_ours(plan.text(self.hook_file)):
            plan.set(self.hook_file, None)


QWEN_DISCOVERY_TIMEOUT_MS: Final = 120_000


class QwenSetup(_HookListSetup):
    name = "qwen"
    instructions_file = "QWEN.md"
    markers = (".qwen", "QWEN.md")
    executables = ("qwen",)
    server_file = ".qwen/settings.json"
    server_path = ("mcpServers",)
    hook_file = ".qwen/settings.json"
    # Qwen Code searches this regular expression anywhere in the tool's name.
    matcher = "^(read_file|write_file|edit|notebook_edit|run_shell_command)$"
    hook_timeout = CLI_HOOK_TIMEOUT_SECONDS * 1000  # Qwen Code counts milliseconds

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        # Qwen Code drops a stdio server that has not listed its tools within 30 s of its
        # start, and goes on without the lock tools (so its guard refuses every edit): a
        # loaded machine can start `lockyard serve` slower than that.
        return {"command": how.command, "args": how.serve_args(self.name),
                "discoveryTimeoutMs": QWEN_DISCOVERY_TIMEOUT_MS}  # fmt: skip

    def hook_group(self, how: Invocation) -> dict[str, Any]:
        group = super().hook_group(how)
        group["hooks"][0]["name"] = "lockyard-guard"
        return group


class DroidSetup(_HookListSetup):
    """Factory's droid: Claude-Code-style hooks under the `hooks` key of its project
    settings (droid 0.215.0 did not run hooks from a project `.factory/hooks.json`)."""

    name = "droid"
    instructions_file = "AGENTS.md"
    markers = (".factory",)
    executables = ("droid",)
    server_file = ".factory/mcp.json"
    server_path = ("mcpServers",)
    hook_file = ".factory/settings.json"
    matcher = "Read|Create|Edit|MultiEdit|ApplyPatch|Execute"

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name)}


class _LockToolsOnlySetup(JsonServerSetup):
    """A CLI given the lock tools (its MCP server) and no guard: its hooks could not be run
    here, so nothing refuses its writes of unlocked files."""

    instructions_file = "AGENTS.md"
    guarded = False
    title: str = ""

    @property
    def display(self) -> str:
        return self.title

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name)}

    def install_guard(self, plan: Plan, how: Invocation) -> None:
        pass

    def uninstall_guard(self, plan: Plan) -> None:
        pass


class AuggieSetup(_HookListSetup):
    """Augment's Auggie reads `mcpServers` and Claude-Code-style `hooks` from a workspace's
    `.augment/settings.json` (what `auggie mcp add --project` writes; read in its 0.36.0
    bundle, not run: docs/clis/auggie.md says what is unproven)."""

    name = "auggie"
    instructions_file = "AGENTS.md"
    markers = (".augment",)
    executables = ("auggie",)
    server_file = ".augment/settings.json"
    server_path = ("mcpServers",)
    hook_file = ".augment/settings.json"
    # Auggie tests this regular expression against the tool's name.
    matcher = "^(view|save-file|str-replace-editor|remove-files|launch-process)$"
    hook_timeout = CLI_HOOK_TIMEOUT_SECONDS * 1000  # Auggie counts milliseconds

    def server_entry(self, how: Invocation) -> dict[str, Any]:
        return {"type": "stdio", "command": how.command, "args": how.serve_args(self.name)}


class CrushSetup(_LockToolsOnlySetup):
    """Charm's Crush merges `mcp` from the project's `crush.json` and `.crush.json` (plain
    JSON; its `internal/config` source)."""

    name = "crush"
    title = "Crush"
    markers = ("crush.json", ".crush.json", ".crush")
    executables = ("crush",)
    server_file = "crush.json"
    server_path = ("mcp",)


SETUPS: Final[dict[str, CliSetup]] = {
    setup.name: setup
    for setup in (
        ClaudeCodeSetup(), CodexSetup(), OpenCodeSetup(), GeminiSetup(), CopilotSetup(),
        QwenSetup(), PiSetup(), KiloSetup(), DroidSetup(), AuggieSetup(), CrushSetup(),
    )
}  # fmt: skip
"""Every CLI `lockyard init` can set up, in the order it sets them up."""
