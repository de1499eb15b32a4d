"""A cross-process monitor names locks `namespace::key`; people read the key."""

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.crossproc.deadlock_text import readable


def cycle(first: str, second: str) -> DeadlockInfo:
    steps = (
        CycleStep(agent_id="a", lock_path=first, held_by="b"),
        CycleStep(agent_id="b", lock_path=second, held_by="a"),
    )
    return DeadlockInfo(cycle=steps, victim="a", victim_waits_on=first, victim_waits_on_holder="b")


def test_one_repository_shows_bare_keys_and_the_repository_once() -> None:
    info = cycle("/r/repo::src/a.py", "/r/repo::src/b.py (shared by a)")
    assert readable(info) == (
        "a waits for src/a.py (held by b) -> b waits for src/b.py (shared by a) (held by a)"
        " (in /r/repo)"
    )


def test_several_repositories_or_bare_keys_are_shown_as_they_are() -> None:
    two = cycle("/r/one::src/a.py", "/r/two::src/a.py")
    assert readable(two) == two.describe()
    bare = cycle("src/a.py", "src/b.py")
    assert readable(bare) == bare.describe()
