import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import time_limit

# No per-example deadline anywhere: on a loaded 2-core machine one slow example is no bug,
# and a deadline turns it into a failure one run in several.
settings.register_profile("dev", deadline=None)
# CI replays the same examples on every run, so a red CI is reproducible from its log;
# a developer's runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    """A test past 80% of its timeout fails alone instead of taking its xdist worker down
    (tests/time_limit.py says why)."""
    if not config.pluginmanager.has_plugin("time_limit"):
        config.pluginmanager.register(time_limit, "time_limit")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _restore_lockyard_log_level() -> Iterator[None]:
    """CLI commands run in process quiet the `lockyard` logger; later tests assert on its logs."""
    logger = logging.getLogger("lockyard")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty repository directory (modules that need files in it define their own)."""
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    """A lock directory path the store creates on first use."""
    return tmp_path / "locks"


# The PostgreSQL server fixtures (pg_server, pg_schema, pg_backend) live in pg_support.
from pg_support import pg_backend, pg_schema, pg_server  # noqa: E402, F401


@pytest.hookimpl(tryfirst=True)  # before any fixture of the test is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `--dist loadgroup`, a grouped test carries its group in its node id (how
    pytest-xdist sends a group to one worker). When a pytest / xdist pairing stops doing that
    (pytest-xdist#1386), a group's shared set-up (an agent CLI's play, minutes long) silently
    runs once per worker: fail the group's tests instead, saying why."""
    if (
        getattr(item.config.option, "loadgroup", False)
        and item.get_closest_marker("xdist_group") is not None
        and "@" not in item.nodeid
    ):
        pytest.fail(
            "--dist loadgroup does not group with this pytest and pytest-xdist (the node id "
            "has no @group): see the pytest pin in pyproject.toml",
            pytrace=False,
        )
