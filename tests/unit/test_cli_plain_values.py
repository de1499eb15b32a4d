"""Every lockyard option of a plain type is converted without pydantic, to what typer's own
converter makes of the same value, and an odd value still gets typer's check and message."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from lockyard.cli._plain_values import make_plain
from lockyard.cli.app import build_app

SAMPLES: tuple[Any, ...] = (
    None, "x", "src/a b.py", "", " ", "0", "7", "-3", "007", "+5", "1_000", "4.5", "abc",
    "٣", True, False, 50, ("a", "b"), ["7"], (),
)  # fmt: skip


def outcome(convert: Any, value: Any, param: Any, ctx: Context) -> tuple[str, Any]:
    try:
        return "value", convert.coerce(value, param=param, ctx=ctx)
    except BadParameter as error:
        return "error", error.format_message()
    except Exception as error:  # what a parser raises on a value no command line gives
        return "error", repr(error)


def every_param() -> list[tuple[str, Any, Any]]:
    group = typer.main.get_command(build_app())
    found = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            if hasattr(param, "type_descriptor"):
                found.append((f"{name} {param.name}", command, param))
    return found


def each_kind_of_param() -> list[tuple[str, Any, Any]]:
    """One parameter of each kind (type, parser, bounds, repeatable): building typer's
    converters is slow, and parameters of one kind convert alike."""
    kinds = {}
    for name, command, param in every_param():
        descriptor, info = param.type_descriptor, param.type_descriptor.parameter_info
        kind = (str(descriptor.annotation), info.parser, info.min, info.max, param.multiple)
        kinds.setdefault(kind, (name, command, param))
    return list(kinds.values())


@pytest.mark.parametrize(
    ("name", "command", "param"), each_kind_of_param(), ids=lambda v: str(v).split(" <")[0]
)
def test_a_plain_option_converts_each_value_as_typer_does(
    name: str, command: Any, param: Any
) -> None:
    ctx = Context(command)
    typers = build_runtime_param(param.type_descriptor)
    param._runtime_param = None
    make_plain([param])
    plain = param._runtime_param
    for value in SAMPLES:
        expected = outcome(typers, value, param, ctx)
        got = outcome(plain, value, param, ctx) if plain is not None else expected
        assert got == expected, (name, value)


def test_the_journal_commands_plain_options_are_all_converted_without_typer() -> None:
    """`log` and `stats` must not build typer's pydantic adapters (their start-up)."""
    made = {name: param._runtime_param for name, _, param in every_param() if _made(param)}
    for command in ("log", "stats"):
        ours = {name: plain for name, plain in made.items() if name.startswith(command + " ")}
        assert ours
        assert all(type(plain).__name__ == "_PlainValue" for plain in ours.values())


def _made(param: Any) -> bool:
    if param.type_descriptor.annotation is bool and param.name in (
        "install_completion",
        "show_completion",
    ):
        return False
    param._runtime_param = None
    make_plain([param])
    return True
