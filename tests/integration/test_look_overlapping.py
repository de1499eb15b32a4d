"""A look without taking (`lock_status`, `lockyard status PATH`) at a directory shows who
holds or waits for anything below it, and at a file the directory locks above it: what an
acquire would conflict with, counted in "would be granted"."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_support import LOCKYARD
from lockstore_support import until_waiting

from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.tools.wait_view import line_view


@pytest.fixture
def tree(repo: Path) -> Path:
    for name in ("src/api/routes.py", "src/db/schema.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo.resolve()


@pytest.fixture
def store(tree: Path, lock_dir: Path) -> LockStore:
    """Alice holds src/api/routes.py, readers Bob and Dan share src/api/models.py, Carol holds
    the directory src/db/."""
    store = LockStore(str(tree), lock_dir)
    assert store.try_lock("src/api/routes.py", "alice")
    assert store.try_lock("src/api/models.py", "bob", mode="shared")
    assert store.try_lock("src/api/models.py", "dan", mode="shared")
    assert store.try_lock("src/db/", "carol")
    return store


def looks(store: LockStore, agent: str, *paths: str) -> dict[str, dict[str, Any]]:
    outcome = anyio.run(LockTools(store, agent).status, {"filepaths": list(paths)})
    assert not outcome.is_error, outcome.text
    return {entry["filepath"]: entry for entry in json.loads(outcome.text)["locks"]}


def test_a_directory_look_names_the_holds_and_readers_below_it(store: LockStore) -> None:
    seen = looks(store, "erin", "src/api/")["src/api/"]
    assert seen["held_by"] == []
    assert seen["would_be_granted"] is False
    below = {o["filepath"]: o for o in seen["overlapping"]}
    assert below.keys() == {"src/api/models.py", "src/api/routes.py"}
    assert [h["agent"] for h in below["src/api/routes.py"]["held_by"]] == ["alice"]
    assert below["src/api/models.py"]["shared_by"] == ["bob", "dan"]
    assert {o["where"] for o in below.values()} == {"below"}
    assert "src/api/routes.py (below) held by alice" in seen["summary"]


def test_a_file_look_names_the_directory_lock_above_it_unless_it_is_yours(
    store: LockStore,
) -> None:
    for_erin = looks(store, "erin", "src/db/schema.py", "src/db/")
    file = for_erin["src/db/schema.py"]
    assert file["held_by"] == []  # the file's own lock is free, yet it is covered
    assert file["would_be_granted"] is False
    assert [(o["filepath"], o["where"]) for o in file["overlapping"]] == [("src/db/", "above")]
    assert "overlapping" not in for_erin["src/db/"]  # nothing above or below it
    assert looks(store, "carol", "src/db/schema.py")["src/db/schema.py"]["would_be_granted"]


def test_status_of_a_directory_shows_what_lies_below_at_80_columns(
    store: LockStore, tree: Path, lock_dir: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"} | {"COLUMNS": "80"}
    done = subprocess.run(
        [LOCKYARD, "status", "--lock-dir", str(lock_dir), "src/api/", "src/db/schema.py"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tree, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Every line fits, but for one that is a single word: the lock directory's path is
    # printed whole, so it can be copied (pytest's temporary paths run past 80 columns).
    assert all(len(line) <= 80 or " " not in line.strip() for line in lines), done.stdout
    text = "\n".join(lines)
    assert "below it: src/api/models.py shared by bob, dan" in text
    assert "below it: src/api/routes.py held by alice" in text
    assert "covered by directory lock src/db/ held by carol" in text
    assert "taking it now: waits for src/api/models.py, src/api/routes.py" in text


def test_a_waiters_view_names_the_readers_it_waits_for(store: LockStore) -> None:
    # `lockyard lock`'s and `lockyard serve`'s progress line: an exclusive request for a file
    # that readers share waits for each of them.
    view = line_view(store, "erin", "src/api/models.py")
    assert [(h.agent_id, h.shared) for h in view.holders] == [("bob", True), ("dan", True)]
    assert view.describe().startswith("src/api/models.py: held by bob (shared), dan (shared)")
    assert "bob" not in {h.agent_id for h in line_view(store, "bob", "src/api/models.py").holders}


def test_a_waiters_view_of_a_file_under_a_directory_lock_names_its_holder_and_line(
    store: LockStore,
) -> None:
    # Erin's file is free itself: Carol holds the directory above it, and Erin stands in
    # that directory's line. Her progress said "being handed over, nobody else waiting".
    views = []

    async def erin_waits_while_we_look() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(store.acquire_async, "src/db/schema.py", "erin", 30.0)
            await until_waiting(store, "src/db/", "erin")
            views.append(line_view(store, "erin", "src/db/schema.py"))
            views.append(line_view(store, "frank", "src/db/schema.py"))
            group.cancel_scope.cancel()

    anyio.run(erin_waits_while_we_look)
    erin, frank = views
    assert [(h.agent_id, h.through) for h in erin.holders] == [("carol", "src/db/")]
    assert (erin.in_line, erin.ahead) == (True, 0)
    assert erin.describe().startswith("src/db/schema.py: held by carol for ")
    assert erin.describe().endswith(" (src/db/), you are next")
    assert frank.describe().endswith(" (src/db/), 1 waiting")
    assert erin.to_dict()["held_by"][0]["through"] == "src/db/"
    assert store.holder("src/db/schema.py") is None  # nothing was taken by the looks
