"""The shell guard's SDK hook and decision API on a real lock store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.shell_guard.decide import ShellGuardPolicy, decide_shell_command
from lockyard.infra.hooks.shell_guard.hook import make_shell_guard_hook
from lockyard.infra.hooks.shell_guard.targets import write_targets
from lockyard.infra.lockstore import LockStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("value = 1\n")
    return LockStore(repo, lock_dir)


def bash(command: Any, cwd: Any = None, tool: str = "Bash") -> dict[str, Any]:
    return {"tool_name": tool, "tool_input": {"command": command}, "cwd": cwd}


def reason(output: Any) -> str:
    specific = output["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    return str(specific["permissionDecisionReason"])


async def test_the_hook_denies_an_unlocked_write_and_names_the_file(store: LockStore) -> None:
    hook = make_shell_guard_hook(store, "alice")
    output = await hook(bash("sed -i s/1/2/ src/app.py", store.root), None, {})
    key = store.canonicalize("src/app.py")
    assert f"{key} (not locked)" in reason(output)
    assert "mcp__lockyard__lock_acquire" in reason(output)
    assert (Path(store.root) / "src" / "app.py").read_text() == "value = 1\n"


async def test_the_hook_allows_the_write_once_the_agent_holds_the_lock(store: LockStore) -> None:
    hook = make_shell_guard_hook(store, "alice")
    assert store.try_lock("src/app.py", "alice")
    assert await hook(bash("sed -i s/1/2/ src/app.py", store.root), None, {}) == {}


async def test_the_hook_names_the_other_holder(store: LockStore) -> None:
    hook = make_shell_guard_hook(store, "alice", server_key="locks")
    assert store.try_lock("src/app.py", "bob")
    text = reason(await hook(bash("rm src/app.py"), None, {}))
    assert "locked by bob" in text
    assert "mcp__locks__lock_acquire" in text
    assert "waits for bob" in text


async def test_the_hook_runs_relative_paths_from_the_repository_without_a_cwd(
    store: LockStore,
) -> None:
    hook = make_shell_guard_hook(store, "alice")
    assert "app.py" in reason(await hook(bash("cd src && rm app.py", None), None, {}))


@pytest.mark.parametrize(
    "input_data",
    [
        bash("rm src/app.py", tool="Read"),
        bash(""),
        bash("   "),
        bash(None),
        {"tool_name": "Bash", "tool_input": "rm src/app.py"},
        "not a dict",
    ],
)
async def test_the_hook_ignores_other_tools_and_empty_commands(
    store: LockStore, input_data: Any
) -> None:
    assert await make_shell_guard_hook(store, "alice")(input_data, None, {}) == {}


async def test_an_unreadable_command_is_denied_by_default_and_allowed_by_policy(
    store: LockStore,
) -> None:
    strict = make_shell_guard_hook(store, "alice")
    text = reason(await strict(bash("eval $CMD"), None, {}))
    assert "cannot tell which files" in text
    assert "Lock the files you mean to change" in text
    lenient = make_shell_guard_hook(store, "alice", policy=ShellGuardPolicy(undetermined="allow"))
    assert await lenient(bash("eval $CMD"), None, {}) == {}


async def test_the_hook_fails_closed_when_the_store_cannot_be_read(store: LockStore) -> None:
    class Broken:
        namespace = store.namespace
        root = store.root

        def canonicalize(self, filepath: str) -> str:
            return store.canonicalize(filepath)

        def holder(self, filepath: str) -> str | None:
            raise OSError("lock directory gone")

        def globs_over(self, key: str) -> tuple[str, ...]:
            return ()

        def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
            return {key: (self.holder(key), ()) for key in keys}

    text = reason(await make_shell_guard_hook(Broken(), "alice")(bash("rm src/app.py"), None, {}))
    assert "lock directory gone" in text


async def test_the_hook_fails_closed_when_the_guard_itself_fails(store: LockStore) -> None:
    class Exploding:
        namespace = store.namespace

        @property
        def root(self) -> str:
            raise RuntimeError("boom")

        def canonicalize(self, filepath: str) -> str:
            raise AssertionError

        def holder(self, filepath: str) -> str | None:
            raise AssertionError

    text = reason(await make_shell_guard_hook(Exploding(), "alice")(bash("ls"), None, {}))
    assert "could not check this command (boom)" in text


def test_an_unreadable_lock_record_denies_with_the_operator_hint(store: LockStore) -> None:
    class Corrupt:
        namespace = store.namespace
        root = store.root

        def canonicalize(self, filepath: str) -> str:
            return store.canonicalize(filepath)

        def holder(self, filepath: str) -> str | None:
            from lockyard.infra.lockstore.errors import CorruptRecordError

            raise CorruptRecordError("garbled")

        def globs_over(self, key: str) -> tuple[str, ...]:
            return ()

        def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
            return {key: (self.holder(key), ()) for key in keys}

    decision = decide_shell_command("rm src/app.py", None, "alice", Corrupt())
    assert not decision.allowed
    assert "lockyard status" in (decision.reason or "")


def test_a_directory_created_needs_no_lock_but_one_locked_by_another_is_denied(
    store: LockStore,
) -> None:
    assert decide_shell_command("mkdir -p src/new", None, "alice", store).allowed
    assert store.try_lock("src/taken", "bob")
    decision = decide_shell_command("mkdir src/taken", None, "alice", store)
    assert not decision.allowed
    assert decision.unlocked == ((store.canonicalize("src/taken"), "bob"),)


def test_the_decision_lists_the_locked_files_it_checked(store: LockStore) -> None:
    assert store.try_lock("src/app.py", "alice")
    decision = decide_shell_command("touch src/app.py; touch /tmp/x", None, "alice", store)
    assert decision.allowed
    assert decision.locked == (store.canonicalize("src/app.py"),)


def test_write_targets_are_absolute_and_name_the_command(tmp_path: Path) -> None:
    found = write_targets("cd sub && echo x > out.txt; rm $X", str(tmp_path))
    assert [t.path for t in found.targets] == [str(tmp_path / "sub" / "out.txt")]
    assert found.files == [str(tmp_path / "sub" / "out.txt")]
    assert found.undetermined == [
        "`rm $X`: `rm` is given a file name that is only known when it runs"
    ]


def test_a_lost_grant_denies_even_though_the_agent_is_still_the_recorded_holder(
    store: LockStore,
) -> None:
    class Fenced:
        namespace = store.namespace
        root = store.root

        def canonicalize(self, filepath: str) -> str:
            return store.canonicalize(filepath)

        def holder(self, filepath: str) -> str | None:
            return "alice"

        def stale_grant(self, filepath: str, agent_id: str) -> str | None:
            return "fencing number 3 was superseded by 4"

        def globs_over(self, key: str) -> tuple[str, ...]:
            return ()

        def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
            return {key: (self.holder(key), ()) for key in keys}

    decision = decide_shell_command("rm src/app.py", None, "alice", Fenced())
    assert not decision.allowed
    assert decision.unlocked == ((store.canonicalize("src/app.py"), "alice"),)
    assert "fencing number 3 was superseded by 4" in (decision.reason or "")
    assert "lock it again and re-read it" in (decision.reason or "")


def test_the_decision_api_loads_neither_the_sdk_nor_the_tool_schemas() -> None:
    """Agent-CLI hooks run one process per tool call and import only the decision."""
    probe = (
        "import sys\n"
        "from lockyard.infra.hooks.shell_guard.decide import decide_shell_command\n"
        "print(sorted(m for m in ('claude_agent_sdk', 'pydantic', 'mcp') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("command", "viewed"),
    [
        ("cat src/app.py | head -5", ["src/app.py"]),
        ("cd src && sed -n 1,40p app.py", ["src/app.py"]),
        ('f=src/app.py; head -n 3 "$f"', ["src/app.py"]),
        ("wc -l < src/app.py", ["src/app.py"]),
        ("cat src/missing.py src/app.py src/app.py", ["src/app.py"]),
        ("sed -i s/1/2/ src/app.py", []),
        ("ls src && grep value src/app.py", []),
    ],
    ids=[
        "viewer",
        "after-cd",
        "through-a-variable",
        "redirected-in",
        "once-each",
        "sed-i",
        "nothing",
    ],
)
def test_the_decision_names_the_files_a_command_shows(
    store: LockStore, repo: Path, command: str, viewed: list[str]
) -> None:
    decision = decide_shell_command(command, str(repo), "alice", store)
    assert [str(Path(path).relative_to(repo)) for path in decision.viewed] == viewed


async def test_the_hook_notes_what_an_allowed_command_shows_and_nothing_of_a_refused_one(
    store: LockStore, repo: Path
) -> None:
    from lockyard.infra.seen.stale import seen_state

    hook = make_shell_guard_hook(store, "alice")
    refused = await hook(bash("cat src/app.py > src/copy.py", str(repo)), None, {"signal": None})
    assert reason(refused)
    assert seen_state(str(repo), "alice", "src/app.py") == (None, None)
    assert await hook(bash("cat src/app.py", str(repo)), None, {"signal": None}) == {}
    assert seen_state(str(repo), "alice", "src/app.py") == (False, None)
