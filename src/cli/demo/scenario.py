"""The demo's script: a small repository and what each agent will edit, in which order.

Pure and seeded: the same options give the same plan (timings still vary from run to run).
Every agent gets a few ordinary tasks on overlapping files (hot files are picked more
often, so agents contend), and the first agents are scripted into opposite lock orders
(a two-agent cycle, and a three-agent ring when there are enough agents and files) on
files reserved for them, so the deadlock monitor has real work to do. Ordinary tasks can
deadlock among themselves too (an agent keeps what it got while it waits for the rest).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

MODULE_NAMES = (
    "src/app/models.py",
    "src/app/views.py",
    "src/app/config.py",
    "src/app/db.py",
    "src/app/auth.py",
    "src/app/routes.py",
    "src/app/cache.py",
    "src/app/tasks.py",
    "src/app/utils.py",
    "src/app/schemas.py",
    "tests/test_models.py",
    "tests/test_views.py",
    "README.md",
    "pyproject.toml",
    "docs/usage.md",
    "src/app/cli.py",
)

MIN_AGENTS = 2
MAX_AGENTS = 128
MIN_FILES = 3
MAX_FILES = 200
TASKS_PER_AGENT = 4
RING_MIN_AGENTS = 5
RING_MIN_FILES = 6  # the pair's 2 files, the ring's 3, and at least one shared file
ACT_DIRECTORY = "tests/"
ACT_MIN_AGENTS = 8  # the pair, the ring, and the act's writer and two readers
PERSON = "person"
"""The agent id of the person's `lockyard lock` in the act."""
READERS = "readers"
"""The act's rendezvous: both readers hold the directory shared (the writer waits for it)."""
WRITER_WAITS = "writer waits"
"""The act's cue: the writer waits for the directory (the readers hold it until then)."""
PERSON_WAITS = "person waits"
"""The act's cue: the person's `lockyard lock` waits in line (or is done)."""


@dataclass(frozen=True)
class Task:
    """One unit of work: lock `files`, append this task's line to each, release them.

    `incremental` tasks lock one file at a time in the given order, holding what they
    have (this is how opposite lock orders deadlock); `rendezvous` names the deadlock
    group whose members all hold their first file before any asks for the next one.
    A `directory` task locks that directory instead of its files (all under it); a
    `shared` task only reads its files, under a shared lock, and edits nothing.
    """

    number: int
    files: tuple[str, ...]
    incremental: bool = False
    rendezvous: str | None = None
    directory: str | None = None
    shared: bool = False
    after: str | None = None
    """A rendezvous to wait for (not join) before locking anything."""
    hold_until: str | None = None
    """A cue the agent waits for, holding its locks, before it releases them."""

    @property
    def edits(self) -> int:
        """The file edits this task makes (a reader makes none)."""
        return 0 if self.shared else len(self.files)

    @property
    def lock_paths(self) -> tuple[str, ...]:
        """What its lock_acquire asks for: the directory, or the files themselves."""
        return self.files if self.directory is None else (self.directory,)


@dataclass(frozen=True)
class AgentScript:
    agent_id: str
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class DeadlockGroup:
    """Agents scripted into a ring: member i holds files[i], then asks for files[i + 1]."""

    name: str
    members: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class TestsAct:
    """The locks the size of the work, on `directory`: the `readers` hold it shared together
    (their first task) until the `writer` waits for it, to lock the whole directory and edit
    every file under it (its first task, begun once both readers hold); the person's
    `lockyard lock` of `person_file` (a process started with the run) queues behind the
    writer, who keeps the directory until the person waits."""

    __test__ = False  # not a pytest class, whatever its name

    directory: str
    files: tuple[str, ...]
    writer: str
    readers: tuple[str, str]
    person_file: str

    @property
    def person_line(self) -> str:
        """The line the person's command appends to `person_file`."""
        return edit_line(PERSON, 1)


@dataclass(frozen=True)
class Scenario:
    seed: int
    files: tuple[str, ...]
    agents: tuple[AgentScript, ...]
    deadlock_groups: tuple[DeadlockGroup, ...] = field(default=())
    act: TestsAct | None = None

    @property
    def total_edits(self) -> int:
        """File edits in the whole run: one per (task, file), and the person's."""
        agents = sum(task.edits for agent in self.agents for task in agent.tasks)
        return agents + (self.act is not None)

    def expected_lines(self) -> dict[str, list[str]]:
        """Per file, every line the run must leave in it exactly once."""
        expected: dict[str, list[str]] = {name: [] for name in self.files}
        for agent in self.agents:
            for task in agent.tasks:
                for name in () if task.shared else task.files:
                    expected[name].append(edit_line(agent.agent_id, task.number))
        if self.act is not None:
            expected[self.act.person_file].append(self.act.person_line)
        return expected


def edit_line(agent_id: str, task_number: int) -> str:
    return f"{agent_id} edit {task_number}"


def file_header(name: str) -> str:
    """The content a generated file starts with (the edits are appended below it)."""
    return f"# {name}: generated by lockyard demo\n"


def file_names(count: int) -> tuple[str, ...]:
    names = list(MODULE_NAMES[:count])
    names += [f"src/app/module_{index:03d}.py" for index in range(len(names), count)]
    return tuple(names)


def agent_name(index: int) -> str:
    return f"agent-{index + 1}"


def validate_size(agents: int, files: int) -> None:
    """Raise ValueError naming the allowed range when the demo cannot be built."""
    if not MIN_AGENTS <= agents <= MAX_AGENTS:
        raise ValueError(f"--agents must be between {MIN_AGENTS} and {MAX_AGENTS}, got {agents}")
    if not MIN_FILES <= files <= MAX_FILES:
        raise ValueError(f"--files must be between {MIN_FILES} and {MAX_FILES}, got {files}")


def build_scenario(
    agents: int = 8, files: int = 12, seed: int = 7, *, scopes: bool = True
) -> Scenario:
    """The plan; `scopes` False (a backend without directory and shared locks) leaves the
    act out."""
    validate_size(agents, files)
    rng = random.Random(seed)
    names = file_names(files)
    agent_ids = [agent_name(index) for index in range(agents)]

    act = _tests_act(names, agent_ids) if scopes else None
    rings = [("pair", agent_ids[:2])]
    if agents >= RING_MIN_AGENTS and files >= RING_MIN_FILES:
        rings.append(("ring", agent_ids[2:5]))
    # The act's files are its own too: a reader holding `tests/` while it waits for the
    # other reader must not block anyone the monitor cannot see waiting.
    outside = names if act is None else tuple(n for n in names if n not in act.files)
    groups, pool = _deadlock_groups(rings, outside, rng)
    opening = {
        member: Task(
            number=1,
            files=_rotate(group.files, index),
            incremental=True,
            rendezvous=group.name,
        )
        for group in groups
        for index, member in enumerate(group.members)
    }

    if act is not None:
        opening[act.writer] = Task(
            number=1,
            files=act.files,
            directory=act.directory,
            after=READERS,
            hold_until=PERSON_WAITS,
        )
        for reader in act.readers:
            opening[reader] = Task(
                number=1,
                files=act.files,
                directory=act.directory,
                shared=True,
                rendezvous=READERS,
                hold_until=WRITER_WAITS,
            )

    scripts = []
    for agent_id in agent_ids:
        tasks: list[Task] = []
        if agent_id in opening:
            tasks.append(opening[agent_id])
        while len(tasks) < TASKS_PER_AGENT:
            size = min(rng.choices((1, 2, 3), weights=(4, 4, 2))[0], len(pool))
            tasks.append(Task(number=len(tasks) + 1, files=_pick_hot(rng, pool, size)))
        scripts.append(AgentScript(agent_id=agent_id, tasks=tuple(tasks)))
    return Scenario(
        seed=seed, files=names, agents=tuple(scripts), deadlock_groups=tuple(groups), act=act
    )


def _tests_act(names: tuple[str, ...], agent_ids: list[str]) -> TestsAct | None:
    """The act on `tests/` when the team has agents to spare beyond the pair and the ring,
    and the repository has at least two files under `tests/` and six outside it."""
    files = tuple(name for name in names if name.startswith(ACT_DIRECTORY))
    if len(agent_ids) < ACT_MIN_AGENTS or len(files) < 2 or len(names) - len(files) < 6:
        return None
    writer, *readers = agent_ids[5:8]
    return TestsAct(
        directory=ACT_DIRECTORY,
        files=files,
        writer=writer,
        readers=(readers[0], readers[1]),
        person_file=files[0],
    )


def _deadlock_groups(
    rings: list[tuple[str, list[str]]], names: tuple[str, ...], rng: random.Random
) -> tuple[list[DeadlockGroup], tuple[str, ...]]:
    """One group per ring on files of its own, and the files left for ordinary tasks.

    A ring's files are reserved for it, taken from the least contended end of the repo:
    a member that holds its first file waits for the others at a rendezvous the monitor
    cannot see, so no ordinary task may be able to block another member's first file.
    """
    needed = sum(len(members) for _, members in rings)
    reserved = list(names[len(names) - needed :])
    rng.shuffle(reserved)
    groups = []
    for name, members in rings:
        files, reserved = reserved[: len(members)], reserved[len(members) :]
        groups.append(DeadlockGroup(name=name, members=tuple(members), files=tuple(files)))
    return groups, names[: len(names) - needed]


def _rotate(files: tuple[str, ...], start: int) -> tuple[str, ...]:
    """Member `start` of a ring holds files[start] first and then needs the next one."""
    return (files[start], files[(start + 1) % len(files)])


def _pick_hot(rng: random.Random, names: tuple[str, ...], size: int) -> tuple[str, ...]:
    """Distinct files, the first ones of the repo far more often (so agents contend)."""
    weights = [1.0 / (rank + 1) for rank in range(len(names))]
    pool = list(names)
    chosen: list[str] = []
    for _ in range(size):
        pick = rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(pick))
        weights.pop(pick)
    return tuple(chosen)
