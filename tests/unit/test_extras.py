"""A use that needs a part an extra brings says, in one line, which extra to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

from lockyard.cli._errors import ExitCode, reports_errors
from lockyard.core.extras import MCP, POSTGRES, SDK, Extra, MissingExtraError, installed, require


def test_require_returns_the_module_an_installed_extra_brings() -> None:
    assert require(SDK, "this test").__name__ == "claude_agent_sdk"
    assert require(POSTGRES, "this test").__name__ == "psycopg"
    assert require(MCP, "this test").__name__ == "mcp"
    assert MCP.name == SDK.name  # mcp comes with lockyard[sdk]
    assert installed(SDK)
    assert installed(POSTGRES)


def test_a_missing_extra_is_one_line_that_names_the_extra_and_the_use() -> None:
    absent = Extra("ghost", "lockyard_no_such_module", "the ghost part")
    assert not installed(absent)
    with pytest.raises(MissingExtraError) as caught:
        require(absent, "haunting")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("haunting needs the ghost part")
    assert "lockyard[ghost]" in message
    assert isinstance(caught.value, ImportError)  # `except ImportError` still catches it


def test_an_installed_extra_that_is_broken_keeps_its_own_traceback(tmp_path: Path) -> None:
    # The extra's module is there but imports something missing: that error, not "install it".
    (tmp_path / "lockyard_broken_extra.py").write_text("import lockyard_missing_dependency\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ModuleNotFoundError) as caught:
            require(Extra("broken", "lockyard_broken_extra", "a broken part"), "this test")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lockyard_broken_extra", None)
    assert not isinstance(caught.value, MissingExtraError)
    assert caught.value.name == "lockyard_missing_dependency"


def test_a_command_that_lacks_an_extra_prints_one_line_and_exits_8(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @reports_errors
    def command() -> None:
        require(Extra("ghost", "lockyard_no_such_module", "the ghost part"), "lockyard haunt")

    with pytest.raises(typer.Exit) as caught:
        command()
    assert caught.value.exit_code == ExitCode.MISSING_EXTRA == 8
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "lockyard[ghost]" in err
