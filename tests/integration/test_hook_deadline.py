"""A guard that does not answer in time refuses the call, never lets it through.

Codex, Gemini CLI, Qwen Code and Copilot let a call through when their hook times out, and
OpenCode, Kilo and pi wait for their plugin for ever: so the command hook and the plugins
refuse the call at a deadline of their own (25 s; 1 s here, set before the hook's modules
load), whatever is stuck: a guard server that accepts the connection and never answers, the
hook's own judgement (here: a sandbox host that never reads the request), or a hook process
that hangs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.agentcli.setups import Invocation, opencode_plugin
from lockyard.infra.transports.ipc.folder import HOST_STATUS, REQUESTS, RESPONSES

# The real hook command, its deadline shortened before any of its modules is imported.
HOOK_WITH_A_SHORT_DEADLINE = """
import sys
from lockyard.infra.agentcli import hook_timeouts
hook_timeouts.HOOK_DEADLINE_SECONDS = 1.0
from lockyard.cli.hook import main
sys.exit(main(sys.argv[1:]))
"""
WRITES_A_FILE = json.dumps({"tool_name": "Bash", "tool_input": {"command": "echo x > a.py"}})


@pytest.fixture
def silent_guard() -> Iterator[int]:
    """A port where something accepts connections (the kernel's backlog) and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def run_hook(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_GUARD_PORT"}
    return subprocess.run(
        [sys.executable, "-c", HOOK_WITH_A_SHORT_DEADLINE, "pre-tool-use", *args],
        input=WRITES_A_FILE, capture_output=True, text=True, timeout=120, env=env, cwd=cwd,
    )  # fmt: skip


def test_a_guard_that_accepts_the_call_and_never_answers_gets_it_refused(
    silent_guard: int, tmp_path: Path
) -> None:
    done = run_hook("--cli", "codex", "--lock-dir", str(tmp_path / "locks"),
                    "--guard-port", str(silent_guard), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert "lockyard's guard did not answer within 1 s" in done.stderr
    assert "so this call is refused" in done.stderr


def test_a_hook_still_judging_at_its_deadline_refuses_the_call(tmp_path: Path) -> None:
    # A sandbox's hook asks its host through the IPC folder and waits up to 15 s for an
    # answer: no host reads this folder, so the judgement is still waiting at the deadline.
    folder = tmp_path / "ipc"
    for name in (REQUESTS, RESPONSES):
        (folder / name).mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    (folder / HOST_STATUS).write_text("{}")
    done = run_hook("--cli", "claude-code", "--ipc", str(folder), cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.strip().startswith("lockyard's guard did not answer within 1 s")
    assert "host" not in done.stderr  # the watchdog answered, not the 15 s wait's own deny


# OpenCode's and Kilo's plugin (and pi's extension, which shares its asking code), run by
# node as the CLI would: import the file `lockyard init` writes and call its hook.
NODE_CALLS_THE_PLUGIN = """
const [plugin, directory] = process.argv.slice(1);
const { LockyardGuard } = await import(plugin);
const hooks = await LockyardGuard({ directory });
try {
  await hooks["tool.execute.before"]({ tool: "bash" }, { args: { command: "echo x > a.py" } });
  console.log("allowed");
} catch (error) {
  console.log(`refused: ${error.message}`);
}
"""


def plugin_with_short_waits(tmp_path: Path, command: str, port: int) -> Path:
    text = opencode_plugin(
        "opencode", Invocation(command, str(tmp_path / "locks"), guard_port=port)
    )
    for constant in ("GUARD_DEADLINE_MS", "HOOK_TIMEOUT_MS"):
        start = text.index(f"const {constant} = ")
        end = text.index(";", start)
        text = text[:start] + f"const {constant} = 500" + text[end:]
    path = tmp_path / f"lockyard-{port}.mjs"
    path.write_text(text)
    return path


def by_plugin(plugin: Path, repo: Path) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH to run the OpenCode plugin with")
    done = subprocess.run(
        [node, "--input-type=module", "-e", NODE_CALLS_THE_PLUGIN, str(plugin), str(repo)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_plugins_refuse_when_the_guard_or_the_hook_process_hangs(
    silent_guard: int, tmp_path: Path
) -> None:
    hangs = tmp_path / "hangs"
    hangs.write_text("#!/bin/sh\nexec sleep 600\n")
    hangs.chmod(0o755)
    late = "refused: lockyard's guard did not answer within 25 s"
    # The guard accepts the request and never answers: refused at the plugin's deadline.
    assert by_plugin(plugin_with_short_waits(tmp_path, str(hangs), silent_guard), tmp_path) == (
        late + " (the machine is very busy, or the guard is stuck), so this call is refused. "
        "Retry it; if it is refused again, ask the operator to run `lockyard doctor`."
    )
    # Nobody listens, and the hook process it starts instead hangs: killed, and refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = probe.getsockname()[1]
    assert by_plugin(plugin_with_short_waits(tmp_path, str(hangs), nobody), tmp_path).startswith(
        late
    )
