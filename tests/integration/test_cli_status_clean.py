"""`lockyard status` and `lockyard clean` through the real entry point, on a real lock
directory, with locks held and awaited by real processes (some of them SIGKILLed)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path
from typing import Any

import pytest
from cli_support import LOCKYARD, Agents, lockyard

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.crossproc.notices import VictimNotice, VictimNoticeBoard
from lockyard.infra.lockstore import LockStore
from polling_support import wait_until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (path / name).write_text("x\n")
    return path.resolve()


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


def status_json(lock_dir: Path) -> dict[str, Any]:
    done = lockyard("status", "--lock-dir", str(lock_dir), "--json")
    assert done.returncode == 0, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload


def by_file(payload: dict[str, Any], repo: Path) -> dict[str, dict[str, Any]]:
    """The locks by key; every holder's checkout is `repo`."""
    for lock in payload["locks"]:
        assert lock["holder"] is None or lock["holder"]["checkout"] == str(repo)
    return {lock["lock_path"]: lock for lock in payload["locks"]}


def tree(root: Path) -> dict[str, tuple[int, int, int, bytes | str]]:
    """Everything a write could change: names, modes, sizes, mtimes, contents."""
    seen = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        if path.is_symlink():
            content: bytes | str = os.readlink(path)
        elif path.is_file():
            content = path.read_bytes()
        else:
            content = ""
        seen[str(path)] = (info.st_mode, info.st_size, info.st_mtime_ns, content)
    return seen


def queued(repo: Path, lock_dir: Path, name: str) -> list[str]:
    return [waiter.agent_id for waiter in LockStore(repo, lock_dir).waiters(name)]


def status_read_only(lock_dir: Path) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """`lockyard status --json` and `lockyard status`, checked to have written nothing."""
    before = tree(lock_dir)
    payload = status_json(lock_dir)
    text = lockyard("status", "--lock-dir", str(lock_dir))
    assert tree(lock_dir) == before  # read-only
    return payload, text


def deadlock_two_agents(agents: Agents, repo: Path, lock_dir: Path) -> None:
    """agent-one holds a.py and waits for b.py; agent-two holds b.py and waits for a.py."""
    one = agents.start("agent-one", holds="a.py", waits="b.py")
    two = agents.start("agent-two", holds="b.py", waits="a.py")
    agents.go(one, two)
    wait_until(lambda: queued(repo, lock_dir, "a.py") == ["agent-two"])
    wait_until(lambda: queued(repo, lock_dir, "b.py") == ["agent-one"])
    wait_until(lambda: heads_settled(lock_dir, 2), "both heads' grants staged, doorbells open")


def heads_settled(lock_dir: Path, heads: int) -> bool:
    """Each of `heads` waiters, first in its queue behind a holder in another process, has
    staged the grant a release would hand over to it and then opened its doorbell: its last
    writes before it sleeps. Until a lock is released the lock directory stays as it is."""
    names = [entry.name for entry in lock_dir.iterdir()]
    staged = sum(".tmp-" in name for name in names)
    doorbells = sum(".bell-" in name for name in names)
    return staged == heads and doorbells == heads


# --- status


def test_status_with_no_locks_says_so(lock_dir: Path) -> None:
    done = lockyard("status", "--lock-dir", str(lock_dir))
    assert done.returncode == 0, done.stderr
    assert "No locks in" in done.stdout
    payload = status_json(lock_dir)
    assert payload["locks"] == []
    assert payload["counts"]["locks"] == 0


def test_a_lock_dir_that_does_not_exist_yet_is_an_empty_one_and_is_not_created(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope"
    shown = lockyard("status", "--lock-dir", str(missing))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert f"No locks in {missing} (--lock-dir): the directory does not exist yet" in text
    payload = status_json(missing)
    assert payload["locks"] == []
    assert payload["deadlocks"] == []
    assert payload["lock_dir"] == str(missing)
    assert payload["lock_dir_exists"] is False
    assert payload["lock_dir_source"] == "--lock-dir"
    cleaned = lockyard("clean", "--lock-dir", str(missing))
    assert cleaned.returncode == 0, cleaned.stderr
    assert "Nothing to release" in cleaned.stdout
    cleaned_json = json.loads(
        lockyard("clean", "--all", "--yes", "--json", "--lock-dir", str(missing)).stdout
    )
    assert cleaned_json["released"] == []
    assert cleaned_json["ended_waits"] == []
    once = lockyard("monitor", "--once", "--lock-dir", str(missing))
    assert once.returncode == 0, once.stderr
    assert f"no deadlock in {missing}" in once.stdout
    assert not missing.exists()  # looking never creates it


def test_status_lock_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    done = lockyard("status", "--lock-dir", str(not_a_dir))
    assert done.returncode == 3
    assert "is not a directory" in done.stderr


def test_status_shows_holders_liveness_and_waiters_in_order_and_writes_nothing(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    agents.start("live-holder", holds="a.py")
    doomed = agents.start("killed-holder", holds="b.py")
    agents.kill(doomed)
    first = agents.start("first-waiter", waits="a.py")
    agents.go(first)
    wait_until(lambda: queued(repo, lock_dir, "a.py") == ["first-waiter"])
    second = agents.start("second-waiter", waits="a.py")
    agents.go(second)
    wait_until(lambda: queued(repo, lock_dir, "a.py") == ["first-waiter", "second-waiter"])
    wait_until(lambda: heads_settled(lock_dir, 1), "the head's grant staged, doorbell open")

    payload, text = status_read_only(lock_dir)

    locks = by_file(payload, repo)
    assert set(locks) == {"a.py", "b.py"}
    held = locks["a.py"]
    assert held["holder"]["agent_id"] == "live-holder"
    assert held["holder"]["pid"] == agents.processes[0].pid
    assert held["liveness"] == "alive"
    assert held["age_seconds"] >= 0
    assert [w["agent_id"] for w in held["waiters"]] == ["first-waiter", "second-waiter"]
    assert locks["b.py"]["holder"]["agent_id"] == "killed-holder"
    assert locks["b.py"]["liveness"] == "dead"
    assert payload["counts"] == {
        "locks": 2,
        "dead_holders": 1,
        "waiters": 2,
        "unreadable": 0,
        "deadlocks": 0,
    }
    assert payload["deadlocks"] == []

    assert text.returncode == 0, text.stderr
    assert "live-holder" in text.stdout
    assert "killed-holder" in text.stdout
    assert "dead" in text.stdout
    assert "first-waiter" in text.stdout
    assert text.stdout.index("first-waiter") < text.stdout.index("second-waiter")
    assert "lockyard clean" in text.stdout


def test_status_finds_a_deadlock_between_two_processes(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    deadlock_two_agents(agents, repo, lock_dir)
    payload, text = status_read_only(lock_dir)

    [deadlock] = payload["deadlocks"]
    assert {step["agent_id"] for step in deadlock["cycle"]} == {"agent-one", "agent-two"}
    assert deadlock["victim"] in {"agent-one", "agent-two"}
    assert payload["counts"]["deadlocks"] == 1
    assert "deadlock: " in text.stdout
    assert "would ask" in text.stdout
    assert text.stderr == ""  # the private monitor's log lines stay off the terminal


# --- clean


def test_clean_reclaims_a_killed_holders_lock_and_leaves_a_live_one(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    agents.start("live-holder", holds="a.py")
    doomed = agents.start("killed-holder", holds="b.py,c.py")
    agents.kill(doomed)

    done = lockyard("clean", "--lock-dir", str(lock_dir), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["mode"] == "stale"
    assert payload["count"] == 2
    released = {Path(entry["lock_path"]).name: entry for entry in payload["released"]}
    assert set(released) == {"b.py", "c.py"}
    assert released["b.py"]["agent_id"] == "killed-holder"
    assert released["b.py"]["pid"] == doomed.pid

    locks = by_file(status_json(lock_dir), repo)
    assert set(locks) == {"a.py"}
    assert locks["a.py"]["holder"]["agent_id"] == "live-holder"

    again = lockyard("clean", "--lock-dir", str(lock_dir))
    assert again.returncode == 0
    assert "Nothing to release" in again.stdout


def test_clean_prints_what_it_released(agents: Agents, lock_dir: Path) -> None:
    agents.kill(agents.start("killed-holder", holds="b.py"))
    done = lockyard("clean", "--lock-dir", str(lock_dir))
    assert done.returncode == 0, done.stderr
    assert "released" in done.stdout
    assert "b.py (held by killed-holder)" in done.stdout
    assert "1 stale lock(s) released." in done.stdout


def test_clean_agent_releases_its_locks_and_wakes_the_waiter(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    agents.start("stuck", holds="a.py,b.py")
    agents.start("bystander", holds="c.py")
    waiter = agents.start("waiter", waits="a.py")
    agents.go(waiter)
    wait_until(lambda: queued(repo, lock_dir, "a.py") == ["waiter"])

    done = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "stuck", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["mode"] == "agent"
    assert sorted(Path(entry["lock_path"]).name for entry in payload["released"]) == [
        "a.py",
        "b.py",
    ]
    assert waiter.stdout is not None
    assert waiter.stdout.readline().strip() == "acquired a.py"
    locks = by_file(status_json(lock_dir), repo)
    assert {name: lock["holder"]["agent_id"] for name, lock in locks.items()} == {
        "a.py": "waiter",
        "c.py": "bystander",
    }


def test_clean_all_without_a_terminal_or_yes_refuses_and_changes_nothing(
    agents: Agents, lock_dir: Path
) -> None:
    agents.start("holder", holds="a.py,b.py")
    before = tree(lock_dir)
    done = lockyard("clean", "--lock-dir", str(lock_dir), "--all", stdin="y\n")
    assert done.returncode == 4
    assert "--yes" in done.stderr
    assert "nothing was released" in done.stderr
    assert tree(lock_dir) == before


def test_clean_all_yes_releases_every_lock(agents: Agents, repo: Path, lock_dir: Path) -> None:
    agents.start("one", holds="a.py")
    agents.start("two", holds="b.py,c.py")
    done = lockyard("clean", "--lock-dir", str(lock_dir), "--all", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["mode"] == "all"
    assert payload["count"] == 3
    assert status_json(lock_dir)["locks"] == []


def test_clean_agent_and_all_together_is_a_usage_error(lock_dir: Path) -> None:
    done = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "x", "--all")
    assert done.returncode == 2
    assert "cannot be combined" in done.stderr
    for bad in (" ", "a\x01b"):
        refused = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", bad)
        assert refused.returncode == 2
        assert refused.stderr.startswith("lockyard: error: agent_id")
        assert "Traceback" not in refused.stderr


def test_a_corrupt_holder_record_is_reported_with_its_file_and_only_clean_all_removes_it(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    agents.kill(agents.start("killed-holder", holds="a.py"))
    [lock] = [entry for entry in lock_dir.iterdir() if entry.name.endswith(".lock")]
    [record] = list(lock.iterdir())
    record.unlink()
    record.symlink_to(json.dumps({"agent_id": "killed-holder", "lock_path": str(repo / "a.py")}))
    for card in lock_dir.glob("*.card"):  # the dead holder's card, named by no record now
        card.unlink()
    before = tree(lock_dir)

    done = lockyard("status", "--lock-dir", str(lock_dir), "--json")
    assert done.returncode == 5
    [entry] = json.loads(done.stdout)["locks"]
    assert entry["holder"] is None
    assert "unreadable holder record" in entry["problem"]
    assert f"(for {repo / 'a.py'})" in entry["problem"]  # the file it blocks
    assert "token: Field required" in entry["problem"]  # one line per field, no pydantic URL
    assert "errors.pydantic.dev" not in entry["problem"]
    assert "\n" not in entry["problem"]
    text = lockyard("status", "--lock-dir", str(lock_dir))
    assert text.returncode == 5
    assert "unreadable" in text.stdout
    assert "Traceback" not in text.stderr

    for args in ([], ["--agent", "killed-holder"]):  # never judged by liveness or agent
        cleaned = lockyard("clean", "--lock-dir", str(lock_dir), *args)
        assert cleaned.returncode == 5, cleaned.stderr
        assert "left alone (unreadable)" in cleaned.stdout
        assert "Traceback" not in cleaned.stderr
    assert tree(lock_dir) == before
    # An operator's --all removes it (by the token it was found under), and the file is free.
    cleaned = lockyard("clean", "--lock-dir", str(lock_dir), "--all", "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert "unreadable record" in cleaned.stdout
    assert LockStore(repo, lock_dir).try_lock("a.py", "next-agent")


def test_an_entry_the_store_did_not_write_is_reported_and_left_alone(lock_dir: Path) -> None:
    (lock_dir / "junk.lock").write_text("not a lock")
    done = lockyard("status", "--lock-dir", str(lock_dir), "--json")
    assert done.returncode == 5
    [entry] = json.loads(done.stdout)["locks"]
    assert "not a directory the store wrote" in entry["problem"]
    cleaned = lockyard("clean", "--lock-dir", str(lock_dir), "--all", "--yes")
    assert cleaned.returncode == 5
    assert (lock_dir / "junk.lock").read_text() == "not a lock"


def test_the_lock_dir_comes_from_the_environment_without_an_option(
    agents: Agents, lock_dir: Path
) -> None:
    agents.start("holder", holds="a.py")
    done = lockyard("status", "--json", env={"LOCKYARD_LOCK_DIR": str(lock_dir)})
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["lock_dir"] == str(lock_dir.resolve())
    assert [lock["holder"]["agent_id"] for lock in payload["locks"]] == ["holder"]


def test_a_symlinked_lock_dir_is_refused(tmp_path: Path, lock_dir: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(lock_dir)
    done = lockyard("status", "--lock-dir", str(link))
    assert done.returncode == 3
    assert "symlink" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("answer", "code", "left"), [("y", 0, 0), ("n", 4, 2)])
def test_clean_all_asks_on_a_terminal(
    agents: Agents, lock_dir: Path, answer: str, code: int, left: int
) -> None:
    agents.start("holder", holds="a.py,b.py")
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            [LOCKYARD, "clean", "--lock-dir", str(lock_dir), "--all"],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(controller, f"{answer}\n".encode())
        out, err = process.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert process.returncode == code, err
    assert "Release all 2 lock(s)" in out
    assert len(status_json(lock_dir)["locks"]) == left


def test_every_environment_finds_the_same_default_lock_dir(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    bare = {key: value for key, value in os.environ.items() if key != "LOCKYARD_LOCK_DIR"}
    bare.pop("XDG_RUNTIME_DIR", None)  # what an MCP stdio client passes to a server
    desktop = bare | {"XDG_RUNTIME_DIR": str(runtime)}  # what a desktop shell has
    looked = []
    for env in (bare, desktop):
        done = subprocess.run(
            [LOCKYARD, "status", "--json"], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode in (0, 5), done.stderr  # whatever other tests left there
        payload = json.loads(done.stdout)
        assert payload["lock_dir_source"] == "per-user default"
        looked.append(payload["lock_dir"])
    assert looked[0] == looked[1]
    assert not (runtime / "lockyard").exists()
    shown = subprocess.run(
        [LOCKYARD, "status"], capture_output=True, text=True, timeout=60, env=desktop
    )
    assert "(per-user default)" in shown.stdout


def test_status_shows_a_pending_victim_notice_and_a_dead_waiter(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    agents.start("holder", holds="a.py")
    doomed = agents.start("doomed-waiter", waits="a.py")
    agents.go(doomed)
    wait_until(lambda: queued(repo, lock_dir, "a.py") == ["doomed-waiter"])
    agents.kill(doomed)
    key = str(repo / "a.py")
    info = DeadlockInfo(
        cycle=(
            CycleStep(agent_id="agent-x", lock_path=key, held_by="agent-y"),
            CycleStep(agent_id="agent-y", lock_path=str(repo / "b.py"), held_by="agent-x"),
        ),
        victim="agent-x",
        victim_waits_on=key,
        victim_waits_on_holder="agent-y",
    )
    VictimNoticeBoard(lock_dir).post(VictimNotice(agent_id="agent-x", waits_on=key, deadlock=info))
    payload, text = status_read_only(lock_dir)
    [notice] = payload["victim_notices"]
    assert notice["agent_id"] == "agent-x"
    assert notice["summary"] == info.describe()
    assert "victim notice: agent-x is asked to give way" in text.stdout
    assert "doomed-waiter (dead, waiting" in text.stdout


# --- output for people and pipes


def test_monitor_reports_each_deadlock_once_without_verbose(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    deadlock_two_agents(agents, repo, lock_dir)
    done = lockyard("monitor", "--once", "--no-resolve", "--lock-dir", str(lock_dir))
    assert done.returncode == 6, done.stderr
    both = done.stdout + done.stderr
    assert both.count("agent-one waits for") == 1  # printed once, not logged a second time
    assert done.stderr == ""


def test_status_in_a_pipe_shows_every_column_uncropped(
    agents: Agents, repo: Path, lock_dir: Path
) -> None:
    deep = "src/" + "/".join(f"package_{n}" for n in range(8)) + "/module.py"
    holder = agents.start("holder-with-a-rather-long-agent-name", holds=deep)
    waiters = [agents.start(f"waiter-{n}", waits=deep) for n in range(3)]
    for waiter in waiters:
        agents.go(waiter)
        name = waiter.args[5]
        wait_until(lambda name=name: name in queued(repo, lock_dir, deep))
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    done = subprocess.run(
        [LOCKYARD, "status", "--lock-dir", str(lock_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    [row] = [line for line in done.stdout.splitlines() if "holder-with-a-rather-long" in line]
    assert deep in row  # one line, nothing folded or cropped at 80 columns
    assert "waiter-0" in row
    assert "waiter-2" in row
    assert "waiters (in order)" in done.stdout
    assert "…" not in done.stdout
    # On an 80-column terminal the same table fits, and every waiter is still in its column.
    screen = status_on_a_terminal(lock_dir, columns=80)
    assert max(map(len, screen.splitlines())) <= 80, screen
    rows = [line for line in screen.splitlines() if line.count("│") >= 3]
    last_column = "".join(line.split("│")[-2].strip() for line in rows).replace(" ", "")
    header = [line for line in screen.splitlines() if line.count("┃") >= 3]
    assert "waiters(inorder)" in "".join(line.split("┃")[-2].strip() for line in header).replace(
        " ", ""
    )  # the header may fold too
    for n in range(3):
        assert f"waiter-{n}" in last_column, screen
    assert holder.poll() is None


def status_on_a_terminal(lock_dir: Path, columns: int) -> str:
    """What `lockyard status` shows on a terminal `columns` wide (a pseudo-terminal)."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    with subprocess.Popen(
        [LOCKYARD, "status", "--lock-dir", str(lock_dir)],
        stdin=side, stdout=side, stderr=side, env=env | {"TERM": "dumb"},
    ) as process:  # fmt: skip
        os.close(side)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0
    os.close(main)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_version_and_the_monitor_help_say_what_they_should() -> None:
    version = lockyard("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("lockyard ")
    assert version.stdout.strip().split(" ")[1][0].isdigit()
    helped = subprocess.run(
        [LOCKYARD, "monitor", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"COLUMNS": "200"},
    )
    assert "victims/<agent>.json" in helped.stdout
