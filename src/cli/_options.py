"""Option helpers shared by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

BLANK_METAVAR = " "
"""Shown instead of `<bool>` after an on/off option, which reads as if it took a value."""


def flag(*names: str, help: str) -> Any:
    """An on/off option, shown in `--help` with no value after it."""
    return typer.Option(*names, help=help, metavar=BLANK_METAVAR)


def parse_lock_dir(value: str) -> Path:
    """`--lock-dir`'s value as a path; a blank one is a usage error (exit 2), because
    `Path("")` is the current directory, which every command would then scan or lock in."""
    if not value.strip():
        raise typer.BadParameter(
            "the lock directory must not be empty; pass a path, or leave --lock-dir out "
            "to use $LOCKYARD_LOCK_DIR or the per-user default"
        )
    return Path(value)


def lock_dir_option(help: str, **extra: Any) -> Any:
    """The `--lock-dir DIR` option of every command (blank values rejected)."""
    return typer.Option(
        "--lock-dir",
        metavar="DIR",
        help=help,
        parser=parse_lock_dir,
        show_default=False,
        **extra,
    )


BACKEND_HELP = (
    "Where the locks live: postgresql://user@host:5432/db for agents on many hosts (libpq's "
    "PG* variables, ~/.pgpass and sslmode work; the word postgresql uses them alone), or a "
    "lock directory. Default: $LOCKYARD_BACKEND, else the lock directory (--lock-dir)."
)


def backend_option() -> Any:
    """The `--backend SPEC` option of every command."""
    return typer.Option("--backend", metavar="SPEC", help=BACKEND_HELP, show_default=False)


def _without_bool_metavar(option: Any) -> Any:
    if option is not None:
        option.metavar = BLANK_METAVAR  # the help option is a flag too
    return option


class LockyardCommand(TyperCommand):
    """A command whose `--help` shows no `<bool>` after it."""

    def get_help_option(self, ctx: Any) -> Any:  # a click Context
        return _without_bool_metavar(super().get_help_option(ctx))


class LockyardGroup(TyperGroup):
    """The command group, whose `--help` shows no `<bool>` after it."""

    def get_help_option(self, ctx: Any) -> Any:  # a click Context
        return _without_bool_metavar(super().get_help_option(ctx))
