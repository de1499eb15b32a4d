"""The documented import paths orchestrators use keep working: each is a thin alias of the
module that does the job."""

from __future__ import annotations

import importlib
import inspect

import pytest

# alias module -> (module that holds the code, names orchestrators import through the alias)
ALIASES = {
    "lockyard.infra.tools.locking_mcp": (
        "lockyard.infra.transports.sdk.server",
        {"create_locking_mcp_server"},
    ),
    "lockyard.infra.mcp": ("lockyard.infra.transports.sdk.servers", {"get_mcp_servers"}),
    "lockyard.infra.hooks.deadlock": ("lockyard.infra.hooks.lock_events", {"make_lock_event_hook"}),
    "lockyard.infra.tools.locking": (
        "lockyard.infra.lockstore",
        {
            "canonicalize_path",
            "try_lock",
            "wait_for_lock_async",
            "release_lock",
            "get_lock_holder",
            "cleanup_agent_locks",
            "LockStore",
        },
    ),
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_alias_exposes_the_same_objects_as_its_home(alias: str) -> None:
    home_name, documented_names = ALIASES[alias]
    module = importlib.import_module(alias)
    home = importlib.import_module(home_name)
    assert documented_names <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is getattr(home, name), name


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_alias_defines_nothing_of_its_own(alias: str) -> None:
    module = importlib.import_module(alias)
    own = [
        name
        for name, value in vars(module).items()
        if (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    ]
    assert own == []


def test_domain_deadlock_names_the_monitor_graph_and_value_types() -> None:
    alias = importlib.import_module("lockyard.domain.deadlock")
    homes = {
        "DeadlockMonitor": "lockyard.domain.monitor",
        "WaitForGraph": "lockyard.domain.graph",
        "VictimPolicy": "lockyard.domain.victim",
        "DeadlockInfo": "lockyard.core.deadlock_info",
        "CycleStep": "lockyard.core.deadlock_info",
    }
    for name, home in homes.items():
        assert getattr(alias, name) is getattr(importlib.import_module(home), name), name
    for name in alias.__all__:
        assert getattr(alias, name).__module__ != alias.__name__, name


def test_the_lock_store_functions_live_in_default_store() -> None:
    package = importlib.import_module("lockyard.infra.lockstore")
    home = importlib.import_module("lockyard.infra.lockstore.default_store")
    for name in home.__all__:
        assert getattr(package, name) is getattr(home, name), name
