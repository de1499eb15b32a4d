"""Option helpers shared by the commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from typer._click import ClickException  # typer's own click: what its parser raises
from typer.core import TyperCommand, TyperGroup

from ._plain_values import make_plain

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


def namespace_option(help: str) -> Any:
    """The `--namespace NS` option of the commands that lock as agents do (read from
    $LOCKYARD_NAMESPACE too, as every agent's server reads it)."""
    return typer.Option(
        "--namespace", metavar="NS", envvar="LOCKYARD_NAMESPACE", help=help, show_default=False
    )


def backend_option() -> Any:
    """The `--backend SPEC` option of every command."""
    return typer.Option("--backend", metavar="SPEC", help=BACKEND_HELP, show_default=False)


def _without_bool_metavar(option: Any) -> Any:
    if option is not None:
        option.metavar = BLANK_METAVAR  # the help option is a flag too
    return option


class LockyardCommand(TyperCommand):
    """A command whose `--help` shows no `<bool>` after it, and whose plain options are
    converted without loading pydantic (`_plain_values`)."""

    def get_help_option(self, ctx: Any) -> Any:  # a click Context
        return _without_bool_metavar(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        make_plain(self.get_params(ctx))
        return super().parse_args(ctx, args)


class LockyardGroup(TyperGroup):
    """The command group, whose `--help` shows no `<bool>` after it, and whose usage errors
    are one line on stderr like every other lockyard error (not click's boxed panel)."""

    def get_help_option(self, ctx: Any) -> Any:  # a click Context
        return _without_bool_metavar(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        make_plain(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            outcome = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
        except ClickException as error:
            line = usage_error_line(error)
            if line:  # `lockyard` alone printed its help: nothing is wrong to say
                typer.echo(line, err=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            typer.echo("lockyard: aborted", err=True)
            sys.exit(1)
        sys.exit(outcome if isinstance(outcome, int) else 0)


def usage_error_line(error: ClickException) -> str:
    """`lockyard: error: <click's message>; see '<command> --help'` on one line ("" when
    click has nothing to say, as after the help `lockyard` alone prints)."""
    message = " ".join(error.format_message().split()).rstrip(".")
    context = getattr(error, "ctx", None)
    if not message:
        return ""
    if context is None:
        return f"lockyard: error: {message}"
    return f"lockyard: error: {message}; see '{context.command_path} --help'"
