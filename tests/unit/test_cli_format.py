import json
from pathlib import Path

import pytest
import typer

from lockyard.cli._errors import CliError, ExitCode, reports_errors
from lockyard.cli._format import display_key, format_duration, format_ms, print_json
from lockyard.cli.log import line_of
from lockyard.infra.lockstore import JournalRecord


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-1.0, "0s"),
        (0.0, "0s"),
        (0.0000421, "42µs"),
        (0.00042, "0.4ms"),
        (0.0042, "4.2ms"),
        (0.0421, "42ms"),
        (0.42, "420ms"),
        (0.9996, "1.0s"),
        (9.96, "10s"),
        (12.9, "12s"),
        (75, "1m15s"),
        (303, "5m03s"),
        (2 * 3600 + 7 * 60, "2h07m"),
        (3 * 86400 + 4 * 3600 + 5, "3d04h"),
    ],
)
def test_a_duration_reads_at_every_scale_and_never_as_zero_point_zero(
    seconds: float, text: str
) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (JournalRecord(0, "release", "ns", "a", "f.py", "s", 1, "h", held=0.042), "held 42ms"),
        (JournalRecord(0, "release", "ns", "a", "f.py", "s", 1, "h", held=5400), "held 1h30m"),
        (
            JournalRecord(0, "wait-end", "ns", "a", "f.py", "s", 1, "h", waited=0.0031,
                          outcome="granted"),
            "granted after 3.1ms",
        ),
    ],
)  # fmt: skip
def test_log_writes_a_sub_second_hold_or_wait_in_ms(record: JournalRecord, says: str) -> None:
    assert line_of(record).endswith(says)


def held(kind: str, **more: object) -> JournalRecord:
    return JournalRecord(0, kind, "ns", "bob", "a.py", "s", 1, "h", **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (held("grant"), "bob a.py"),
        (held("grant", outcome="shared", fence=7), "bob a.py: shared, fence 7"),
        (held("hand-over"), "bob a.py"),  # the lock directory's: no giver known
        (held("hand-over", other="alice", fence=8), "bob a.py: from alice, fence 8"),
        (held("hand-over", outcome="upgrade"), "bob a.py: upgrade"),
    ],
)
def test_log_says_a_read_and_whom_a_hand_over_came_from_when_known(
    record: JournalRecord, says: str
) -> None:
    assert line_of(record).endswith(says)
    assert "?" not in line_of(record)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.0000024, "2.4 µs"),
        (0.00012, "0.12 ms"),
        (0.0421, "42.1 ms"),
        (0.5, "500 ms"),
    ],
)
def test_format_ms(seconds: float | None, text: str) -> None:
    assert format_ms(seconds) == text


def test_display_key_is_relative_inside_the_base_only() -> None:
    assert display_key("/repo/src/a.py", Path("/repo")) == "src/a.py"
    assert display_key("/elsewhere/a.py", Path("/repo")) == "/elsewhere/a.py"
    assert display_key("__db__", None) == "__db__"


def test_print_json_prints_one_sorted_document(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"b": 1, "a": [1, 2]})
    out = capsys.readouterr().out
    assert json.loads(out) == {"a": [1, 2], "b": 1}
    assert out.index('"a"') < out.index('"b"')


def test_a_cli_error_becomes_one_line_on_stderr_and_its_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @reports_errors
    def command(fail: bool) -> str:
        if fail:
            raise CliError("the lock dir is gone", ExitCode.LOCK_DIR, "pass --lock-dir")
        return "fine"

    assert command(False) == "fine"
    with pytest.raises(typer.Exit) as exited:
        command(True)
    assert exited.value.exit_code == 3
    err = capsys.readouterr().err
    assert err == "lockyard: error: the lock dir is gone\n  hint: pass --lock-dir\n"
    assert CliError("plain", ExitCode.USAGE).render() == "lockyard: error: plain"
