"""The plain install is what agent CLI sessions need, and nothing that only orchestrators use:
a wheel of this checkout installed into a fresh venv (no extras) runs the demo, sets a
repository up and guards a tool call, and a use that needs an extra says which, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = [sys.executable, str(ROOT / "scripts" / "uv")]


@dataclass(frozen=True)
class LightInstall:
    bin: Path

    def run(
        self, *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=600,
            env={**os.environ, **(env or {})},
        )  # fmt: skip


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> LightInstall:
    where = tmp_path_factory.mktemp("light-install")
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    env.pop("VIRTUAL_ENV", None)
    for command in (
        [*UV, "build", "--wheel", "--out-dir", str(where / "dist"), str(ROOT)],
        [*UV, "venv", "--python", sys.executable, str(where / "venv")],
    ):
        subprocess.run(command, check=True, capture_output=True, env=env, timeout=600)
    wheel = next((where / "dist").glob("lockyard-*.whl"))
    venv_python = where / "venv" / "bin" / "python"
    subprocess.run(
        [*UV, "pip", "install", "--python", str(venv_python), str(wheel)],
        check=True, capture_output=True, env=env, timeout=600,
    )  # fmt: skip
    return LightInstall(where / "venv" / "bin")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_the_plain_install_has_neither_the_sdk_nor_mcp_nor_the_postgres_driver(
    light: LightInstall, repo: Path
) -> None:
    probe = (
        "import importlib.util as u; "
        "print([u.find_spec(m) is None for m in ('claude_agent_sdk', 'mcp', 'psycopg')])"
    )
    done = light.run(str(light.bin / "python"), "-c", probe, cwd=repo)
    assert done.stdout.strip() == "[True, True, True]", done.stderr


def test_the_plain_install_runs_the_demo(light: LightInstall, repo: Path, tmp_path: Path) -> None:
    done = light.run(
        str(light.bin / "lockyard"), "demo", "--agents", "3", "--files", "4", "--json",
        cwd=repo, env={"LOCKYARD_LOCK_DIR": str(tmp_path / "locks")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["ok"] is True


def test_the_plain_install_sets_a_repository_up_and_guards_a_write(
    light: LightInstall, repo: Path, tmp_path: Path
) -> None:
    lockyard = str(light.bin / "lockyard")
    done = light.run(lockyard, "init", "claude-code", cwd=repo)
    assert done.returncode == 0, done.stderr
    call = {
        "hook_event_name": "PreToolUse", "tool_name": "Write", "session_id": "s1",
        "tool_input": {"file_path": str(repo / "a.py"), "content": "x"}, "cwd": str(repo),
    }  # fmt: skip
    done = light.run(
        lockyard, "hook", "pre-tool-use", cwd=repo, stdin=json.dumps(call),
        env={"LOCKYARD_LOCK_DIR": str(tmp_path / "locks")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Refused: no lock tools serve this session, so nothing is locked.
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_postgres_backend_without_its_extra_is_one_line_naming_it(
    light: LightInstall, repo: Path
) -> None:
    done = light.run(
        str(light.bin / "lockyard"), "status", "--backend", "postgresql://nobody@localhost/x",
        cwd=repo,
    )  # fmt: skip
    assert done.returncode == 8
    assert done.stderr.count("\n") == 1
    assert "lockyard[postgres]" in done.stderr


def test_an_orchestrator_without_the_sdk_extra_is_told_to_install_it(
    light: LightInstall, repo: Path
) -> None:
    program = (
        "from lockyard.infra.agent_runtime import AgentRuntimeBuilder\n"
        "from lockyard.infra.tools.locking_mcp import create_locking_mcp_server\n"
        "from lockyard.core.extras import MissingExtraError\n"
        "for use in (\n"
        f"    lambda: AgentRuntimeBuilder({str(repo)!r}).build(),\n"
        f"    lambda: create_locking_mcp_server('agent-1', {str(repo)!r}),\n"
        "):\n"
        "    try:\n"
        "        use()\n"
        "    except MissingExtraError as error:\n"
        "        print(error)\n"
    )
    done = light.run(str(light.bin / "python"), "-c", program, cwd=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    builder, server = done.stdout.splitlines()
    assert "AgentRuntimeBuilder" in builder
    assert "create_locking_mcp_server" in server
    assert "lockyard[sdk]" in builder
    assert "lockyard[sdk]" in server


def test_the_installed_package_ships_its_mit_licence(light: LightInstall, repo: Path) -> None:
    program = (
        "from importlib.metadata import distribution\n"
        "dist = distribution('lockyard')\n"
        "[licence] = [f for f in dist.files if f.name == 'LICENSE']\n"
        "print(licence.read_text().splitlines()[0])\n"
    )
    done = light.run(str(light.bin / "python"), "-c", program, cwd=repo)
    assert done.stdout.strip() == "MIT License", done.stderr[-2000:]
