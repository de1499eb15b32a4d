"""Fixtures for the end-to-end tests: the bundled Claude CLI against a local fake Messages API."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the harness modules beside this file

from fake_messages_api import FakeMessagesApi


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesApi]:
    """A running fake API; a script that could not be followed fails the test at teardown."""
    with FakeMessagesApi(gate_timeout=90.0) as api:  # a gate that opens returns at once
        yield api
    api.raise_errors()


@pytest.hookimpl(tryfirst=True)  # before `-m` selection reads the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs the real CLI: label it e2e, and keep a hang from stalling CI."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(120))
