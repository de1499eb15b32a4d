"""Option helpers shared by the commands."""

from __future__ import annotations

from typing import Any

import typer


def flag(*names: str, help: str) -> Any:
    """An on/off option. The blank metavar keeps `--help` from showing `<bool>` after it, which
    reads as if the flag took a value."""
    return typer.Option(*names, help=help, metavar=" ")
