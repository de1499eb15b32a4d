"""The person of the demo: a real `lockyard lock` process beside the scripted agents.

It runs `lockyard lock FILE -- sh -c "echo 'person edit 1' >> FILE"` in the demo's
repository, on the demo's lock directory, as its own process: it waits its turn in the same
queues as the agents, appends its line while it holds the lock, and releases it when the
command exits. What it says on stderr (who holds the file, its place in line) is kept for the
summary, and its phases go to the recorder, so the live view shows it as one more row.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from .recorder import Phase, SessionRecorder
from .scenario import PERSON, TestsAct

QUEUE_POLL_SECONDS = 0.005
"""How often `in_line` looks for the person's queue entry, once it said it waits (it queues
a moment after it says so)."""
QUEUE_PATIENCE_SECONDS = 2.0
SAID_PREFIX = "lockyard lock: "


@dataclass
class PersonRun:
    """What the person's process did: its command, what it said, how it ended."""

    command: str
    pid: int | None = None
    said: list[str] = field(default_factory=list)
    exit_status: int | None = None
    problem: str | None = None


def lockyard_program() -> list[str] | None:
    """The `lockyard` command beside this interpreter (the venv's, as `uv run` has it),
    else on PATH; None when there is none."""
    beside = Path(sys.executable).parent / "lockyard"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("lockyard")
    return None if found is None else [found]


class PersonLock:
    """Runs the person's `lockyard lock` once, and tells when it waits in line."""

    def __init__(
        self,
        act: TestsAct,
        repo: Path,
        lock_dir: Path,
        recorder: SessionRecorder,
        waiting_agents: Callable[[], Awaitable[set[str]]],
        backend: str | None = None,
    ) -> None:
        """`backend`: the PostgreSQL spec the demo runs on (None: its lock directory)."""
        self._act = act
        self._repo = repo
        self._lock_dir = lock_dir
        self._backend = backend
        self._recorder = recorder
        self._waiting_agents = waiting_agents
        """Who waits in the lines of the act's file and directory now (read from the store)."""
        shell = f"echo {act.person_line} >> {act.person_file}"  # plain words: no quoting
        self._command = ["sh", "-c", shell]
        shown = ["lockyard", "lock", act.person_file, "--", *self._command]
        self.run_record = PersonRun(shlex.join(shown))
        self._said_waiting = anyio.Event()
        self._over = anyio.Event()

    async def run(self) -> None:
        """Start the process, follow what it says, wait for it to end (never raises)."""
        recorder = self._recorder
        recorder.add_agent(PERSON, 1)
        program = lockyard_program()
        if program is None:
            self._end(problem="no `lockyard` command found to run the person's lock")
            return
        # The database's spec goes by the environment, not the command line that `ps` shows.
        where = ["--lock-dir", str(self._lock_dir)] if self._backend is None else []
        env = None if self._backend is None else {**os.environ, "LOCKYARD_BACKEND": self._backend}
        arguments = [
            *program, "lock", *where, "--repo", str(self._repo),
            "--agent-id", PERSON, self._act.person_file, "--", *self._command,
        ]  # fmt: skip
        recorder.set_phase(PERSON, Phase.LOCKING, self._act.person_file)
        try:
            async with await anyio.open_process(
                arguments,
                cwd=self._repo,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            ) as process:
                self.run_record.pid = process.pid
                await self._follow(process)
                status = await process.wait()
        except OSError as error:
            self._end(problem=f"the person's lockyard lock could not start: {error}")
            return
        self.run_record.exit_status = status
        if status == 0:
            recorder.leave(PERSON, self._act.person_file)  # counts its one edit
            recorder.set_phase(PERSON, Phase.DONE)
            self._end()
        else:
            said = "; ".join(self.run_record.said[-2:])
            self._end(problem=f"the person's lockyard lock exited {status}: {said}")

    async def _follow(self, process: anyio.abc.Process) -> None:
        assert process.stderr is not None
        buffered = ""
        async for chunk in process.stderr:
            buffered += chunk.decode("utf-8", "replace")
            *lines, buffered = buffered.split("\n")
            for line in lines:
                self._heard(line.removeprefix(SAID_PREFIX))

    def _heard(self, line: str) -> None:
        if not line.strip():
            return
        self.run_record.said.append(line)
        if line.startswith("waiting for"):
            self._recorder.set_phase(PERSON, Phase.WAITING, line.removeprefix("waiting for "))
            self._said_waiting.set()
        elif line.startswith("holding"):
            self._recorder.set_phase(PERSON, Phase.EDITING, self._act.person_file)

    def _end(self, problem: str | None = None) -> None:
        if problem is not None:
            self.run_record.problem = problem
            self._recorder.set_phase(PERSON, Phase.FAILED, problem)
            self._recorder.anomalies.append(problem)
        self._over.set()

    async def in_line(self) -> None:
        """Until the person stands in line for its file (or its run is over): the cue the
        act's writer holds the directory for, so the person waits its turn behind it."""
        async with anyio.create_task_group() as group:

            async def until_over() -> None:
                await self._over.wait()
                group.cancel_scope.cancel()

            group.start_soon(until_over)
            await self._said_waiting.wait()
            with anyio.move_on_after(QUEUE_PATIENCE_SECONDS):
                # Another process's queue entry: nothing here is told when it appears.
                while PERSON not in await self._waiting_agents():  # noqa: ASYNC110
                    await anyio.sleep(QUEUE_POLL_SECONDS)
            group.cancel_scope.cancel()
