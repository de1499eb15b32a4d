"""Where lockyard's guard listens: a port per lock directory, the same in every process."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockyard.infra.agentcli.guard_address import (
    GuardPortError,
    guard_port,
    hook_url,
    lock_dir_tag,
    parse_port,
)


def test_the_port_is_derived_from_the_lock_directory_unless_one_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCKYARD_GUARD_PORT", raising=False)
    derived = guard_port(str(tmp_path / "a"))
    assert 20000 <= derived < 32768
    assert guard_port(str(tmp_path / "a")) == derived
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert guard_port(str(tmp_path / "link")) == guard_port(str(tmp_path / "real"))
    assert lock_dir_tag(str(tmp_path / "link")) == lock_dir_tag(str(tmp_path / "real"))
    assert guard_port(str(tmp_path / "a"), "4321") == 4321
    monkeypatch.setenv("LOCKYARD_GUARD_PORT", "5432")
    assert guard_port(str(tmp_path / "a")) == 5432
    assert guard_port(str(tmp_path / "a"), 6543) == 6543


@pytest.mark.parametrize("text", ["0", "65536", "-1", "http", "", "  "])
def test_a_port_that_is_no_port_number_says_so(text: str) -> None:
    with pytest.raises(GuardPortError, match="is not a port number"):
        parse_port(text)


def test_an_http_hook_url_names_the_cli_and_the_lock_directory(tmp_path: Path) -> None:
    url = hook_url(str(tmp_path), "claude-code", 4321)
    assert url == (
        f"http://127.0.0.1:4321/v1/pre-tool-use?cli=claude-code&dir={lock_dir_tag(str(tmp_path))}"
    )
