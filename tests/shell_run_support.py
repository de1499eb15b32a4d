"""Judge a command line by the real hook, then run it for real and compare every file.

The harness the shell guard is held to (issue 32): a command line is judged by `lockyard hook
pre-tool-use` with Claude Code's PreToolUse payload, for an agent (`alice`) holding some
files; then, when the hook allows it, bash runs it in a copy of a small git repository, and
every file of the repository and of the lock directory is compared before and after:

- an allowed command that changed a file alice does not hold is a failure (`wrongly_allowed`);
- judging must change nothing at all (the guard only reads: `changed_by_judging`). The one
  thing the hook writes is its step after the decision: for an allowed call, what alice
  reads and writes is noted in the clone's book (`.git/lockyard/seen/`, the stale-read
  check's memory: `noted`); a refused call notes nothing, so there the book counts as judging;
  after every decision, allowed or refused, alice's heartbeat (`locks/active/`) is stamped;
- a denial's reason names, as JSON, the files not locked (`unlocked`) and says when the
  guard cannot tell (`undetermined`).

The hook runs in this process (`lockyard.cli.hook.main`, stdin replaced: the same code path
as the installed command, without a process start per case) or, with `process=True`, as the
installed `lockyard` executable.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.journal.files import JOURNAL_DIR

AGENT = "alice"
LOCKYARD = str(Path(sys.executable).parent / "lockyard")
BOOK = "repo/.git/lockyard/seen/"
HEARTBEATS = "locks/active/"
"""alice's heartbeat, which the hook stamps after every decision (allowed or refused)."""
"""Where the hook notes what alice reads and writes (`lockyard.infra.seen`), in `everything()`."""
FILES: Mapping[str, str] = {
    "README.md": "# demo\n",
    "notes.txt": "notes\n",
    "Makefile": "all:\n\ttrue\n",
    "src/app.py": "value = 1\n",
    "src/utils.py": "def helper():\n    return 1\n",
    "src/models.py": "class Model:\n    pass\n",
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": "core = True\n",
    "tests/test_app.py": "def test_app():\n    assert True\n",
    "docs/guide.md": "guide\n",
    "build/.keep": "",
}
"""The corpus repository (tests/shell_corpus/README.md)."""
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
GIT_ENV: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
RUN_TIMEOUT = 30.0
_UNLOCKED = re.compile(r'\{"filepaths": (\[.*?\])\}')

Snapshot = dict[str, tuple[str, bytes, int]]


def make_template(root: Path, files: Mapping[str, str] = FILES) -> Path:
    """A committed git repository holding `files` (made once, copied for each case), with a
    second branch `feature`."""
    repo = root / "template"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "start"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "branch", "feature"], check=True)
    # What git init adds for people (sample hooks, logs) is left out: every case copies it.
    shutil.rmtree(repo / ".git" / "hooks")
    shutil.rmtree(repo / ".git" / "logs", ignore_errors=True)
    (repo / ".git" / "hooks").mkdir()
    return repo


CACHES = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"})
"""Tool caches (pytest, ruff, mypy, Python's bytecode): written by programs that run, locked
by nobody, left out of the comparison."""


def snapshot(root: Path, *, skip_git: bool = True) -> Snapshot:
    """Every file and symlink under `root` (and `.git`'s unless `skip_git`), tool caches left
    out: kind, content or link text, mode."""
    found: Snapshot = {}
    if not root.exists():
        return found
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in CACHES and not (skip_git and d == ".git")]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    entry = ("link", os.readlink(path).encode(), 0)
                elif stat.S_ISREG(info.st_mode):
                    entry = ("file", Path(path).read_bytes(), info.st_mode & 0o777)
                else:
                    entry = ("other", b"", stat.S_IFMT(info.st_mode))
            except OSError:
                continue
            found[os.path.relpath(path, root)] = entry
    return found


def changed(before: Snapshot, after: Snapshot) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


@dataclass
class Verdict:
    """What the hook answered."""

    allowed: bool
    reason: str | None
    unlocked: list[str] = field(default_factory=list)
    """The files the reason asks to lock (repository-relative), in its order."""

    @property
    def undetermined(self) -> bool:
        return "cannot tell which files" in (self.reason or "")

    @property
    def refused(self) -> bool:
        """Denied whatever the agent locks (the operator's business)."""
        return "ask the operator" in (self.reason or "")


@dataclass
class Outcome:
    command: str
    verdict: Verdict
    held: set[str]
    ran: bool = False
    exit_code: int | None = None
    output: str = ""
    changed: set[str] = field(default_factory=set)
    """Repository files the run changed (content, mode, type, existence)."""
    changed_locks: set[str] = field(default_factory=set)
    """Entries of the lock directory the run changed."""
    changed_by_judging: set[str] = field(default_factory=set)
    """Anything (repository, its .git, the lock directory) that judging changed: all the hook
    changed, but an allowed call's notes in the book."""
    noted: set[str] = field(default_factory=set)
    """The book's entries the hook wrote after allowing the call."""

    @property
    def wrongly_allowed(self) -> set[str]:
        """Files an allowed run changed that the agent does not hold (and lock entries)."""
        if not self.verdict.allowed:
            return set()
        return (self.changed - self.held) | {f"<lock dir>/{n}" for n in self.changed_locks}

    def explain(self) -> str:
        return (
            f"command: {self.command!r}\nallowed: {self.verdict.allowed}\n"
            f"reason: {self.verdict.reason}\nheld: {sorted(self.held)}\n"
            f"changed: {sorted(self.changed)}\nlock dir changed: {sorted(self.changed_locks)}\n"
            f"judging changed: {sorted(self.changed_by_judging)}\n"
            f"exit: {self.exit_code}\noutput: {self.output[-600:]}"
        )


@dataclass
class Sandbox:
    """One copy of the template repository, its lock directory and a home directory."""

    root: Path
    repo: Path
    lock_dir: Path
    home: Path

    @classmethod
    def copy_of(cls, template: Path, root: Path) -> Sandbox:
        root.mkdir(parents=True, exist_ok=True)
        repo = root / "repo"
        shutil.copytree(template, repo, symlinks=True, copy_function=_copy)
        home = root / "home"
        home.mkdir()
        return cls(root.resolve(), repo.resolve(), (root / "locks").resolve(), home.resolve())

    def placed(self, text: str) -> str:
        """`text` with `{repo}` and `{lock_dir}` replaced by this sandbox's paths."""
        return text.replace("{repo}", str(self.repo)).replace("{lock_dir}", str(self.lock_dir))

    def env(self) -> dict[str, str]:
        return {**os.environ, **GIT_ENV, "HOME": str(self.home), "LOCKYARD_LOCK_DIR": ""}

    def setup(self, lines: list[str]) -> None:
        for line in lines:
            subprocess.run(
                ["bash", "-c", line], cwd=self.repo, check=True, env=self.env(),
                capture_output=True,
            )  # fmt: skip

    def lock(self, held: set[str], others: Mapping[str, str] | None = None) -> LockStore:
        store = LockStore(self.repo, self.lock_dir)
        for name in sorted(held):
            assert store.try_lock(name, AGENT), name
        for name, holder in (others or {}).items():
            assert store.try_lock(name, holder), name
        return store

    def everything(self) -> Snapshot:
        """The repository (its .git too) and the lock directory, for 'judging wrote nothing'."""
        found = {f"repo/{k}": v for k, v in snapshot(self.repo, skip_git=False).items()}
        found.update({f"locks/{k}": v for k, v in self.locks().items()})
        return found

    def locks(self) -> Snapshot:
        """The lock directory's entries, its journal left out (the hook journals a denial)."""
        return {
            name: entry
            for name, entry in snapshot(self.lock_dir).items()
            if name.split("/", 1)[0] != JOURNAL_DIR
        }

    def judge(self, command: str, cwd: str = ".", *, process: bool = False) -> Verdict:
        """The hook's answer for alice's Bash call `command` run in `cwd`."""
        payload = json.dumps(
            {
                "session_id": "harness",
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": command, "description": "harness"},
                "cwd": str(self.repo / cwd),
            }
        ).encode()
        args = [
            "pre-tool-use", "--cli", "claude-code", "--agent-id", AGENT,
            "--repo", str(self.repo), "--lock-dir", str(self.lock_dir),
        ]  # fmt: skip
        if process:
            done = subprocess.run(
                [LOCKYARD, "hook", *args], input=payload, capture_output=True,
                env=self.env(), timeout=120, check=False, cwd=self.repo / cwd,
            )  # fmt: skip
            out, code = done.stdout.decode(), done.returncode
        else:
            out, code = _hook_in_process(args, payload, self.home)
        return _verdict(out, code, self.repo)

    def run(self, command: str, cwd: str = ".") -> tuple[int | None, str]:
        """Run `command` with bash in `cwd` (its own process group, killed after
        `RUN_TIMEOUT`); exit code (None on timeout) and output."""
        process = subprocess.Popen(
            ["bash", "-c", command], cwd=self.repo / cwd, env=self.env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = process.communicate(timeout=RUN_TIMEOUT)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            out, code = b"", None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return code, out.decode(errors="replace")


@contextlib.contextmanager
def scratch_space(fallback: Path) -> Iterator[Path]:
    """A fresh directory for sandboxes, removed afterwards: in memory (/dev/shm) when the
    machine has it (copying a repository there is several times faster on a busy disk),
    else under `fallback`."""
    memory = Path("/dev/shm")
    base = memory if memory.is_dir() and os.access(memory, os.W_OK) else fallback
    directory = Path(tempfile.mkdtemp(prefix="lockyard-shell-guard-", dir=base))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _copy(source: str, destination: str) -> None:
    """Git's objects never change once written: linked, not copied (the rest is copied)."""
    if "/.git/objects/" in source:
        os.link(source, destination)
    else:
        shutil.copyfile(source, destination)


def judge_and_run(
    sandbox: Sandbox,
    command: str,
    held: set[str],
    *,
    others: Mapping[str, str] | None = None,
    cwd: str = ".",
    run: bool = True,
    process: bool = False,
) -> Outcome:
    """Judge `command` by the hook for alice holding `held`, then run it when allowed (and
    `run`), comparing every file before and after."""
    sandbox.lock(held, others)
    before_judging = sandbox.everything()
    verdict = sandbox.judge(command, cwd, process=process)
    outcome = Outcome(command, verdict, held)
    by_hook = changed(before_judging, sandbox.everything())
    if verdict.allowed:
        outcome.noted = {name for name in by_hook if name.startswith(BOOK)}
    beats = {name for name in by_hook if name.startswith(HEARTBEATS)}
    outcome.changed_by_judging = by_hook - outcome.noted - beats
    if verdict.allowed and run:
        before, locks_before = snapshot(sandbox.repo), sandbox.locks()
        outcome.exit_code, outcome.output = sandbox.run(command, cwd)
        outcome.ran = True
        outcome.changed = changed(before, snapshot(sandbox.repo))
        outcome.changed_locks = changed(locks_before, sandbox.locks())
    return outcome


def _hook_in_process(args: list[str], payload: bytes, home: Path) -> tuple[str, int]:
    from lockyard.cli import hook

    out = io.StringIO()
    with _swapped_stdin(payload), _home(home), contextlib.redirect_stdout(out):
        code = hook.main(args)
    return out.getvalue(), code


@contextlib.contextmanager
def _swapped_stdin(payload: bytes) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(payload))
    try:
        yield
    finally:
        sys.stdin = saved


@contextlib.contextmanager
def _home(home: Path) -> Iterator[None]:
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved


def _verdict(out: str, code: int, repo: Path) -> Verdict:
    assert code == 0, (code, out)
    if not out.strip():
        return Verdict(True, None)
    answer: Any = json.loads(out)
    specific = answer["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny", answer
    reason = str(specific["permissionDecisionReason"])
    found = _UNLOCKED.search(reason)
    keys = json.loads(found.group(1)) if found else []
    return Verdict(False, reason, [_relative(key, repo) for key in keys])


def _relative(key: str, repo: Path) -> str:
    return os.path.relpath(key, repo) if os.path.isabs(key) else key
