"""The design card's import paths keep working: each names, and defines nothing beside, what
the module that does the job holds."""

from __future__ import annotations

import importlib
import inspect

import pytest

# import path -> (module that holds the code, the names the design card lists there)
IMPORT_PATHS = {
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
        },
    ),
}


@pytest.mark.parametrize("import_path", sorted(IMPORT_PATHS))
def test_an_import_path_exposes_the_same_objects_as_their_home(import_path: str) -> None:
    home_name, documented_names = IMPORT_PATHS[import_path]
    module = importlib.import_module(import_path)
    home = importlib.import_module(home_name)
    assert documented_names <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is getattr(home, name), name


@pytest.mark.parametrize("import_path", sorted(IMPORT_PATHS))
def test_an_import_path_defines_nothing_of_its_own(import_path: str) -> None:
    module = importlib.import_module(import_path)
    own = [
        name
        for name, value in vars(module).items()
        if (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    ]
    assert own == []


def test_the_lock_store_functions_live_in_default_store() -> None:
    package = importlib.import_module("lockyard.infra.lockstore")
    home = importlib.import_module("lockyard.infra.lockstore.default_store")
    for name in home.__all__:
        assert getattr(package, name) is getattr(home, name), name
