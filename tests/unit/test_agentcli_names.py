"""`lockyard serve --help` names every CLI `lockyard init` sets up, from a list kept apart
from the setups (which serve does not load): the two must not drift."""

from typer.testing import CliRunner

from lockyard.cli.app import app
from lockyard.infra.agentcli.names import CLI_NAMES
from lockyard.infra.agentcli.setups import SETUPS


def test_the_names_are_the_setups_in_inits_order() -> None:
    assert tuple(SETUPS) == CLI_NAMES


def test_serve_help_lists_every_cli_name() -> None:
    shown = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    flowing = " ".join(line.strip("│ ") for line in shown.splitlines())
    assert ", ".join(CLI_NAMES) in " ".join(flowing.split())
