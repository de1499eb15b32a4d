"""Who may read `lockyard web`'s page: bind rules, the token, the Host of a loopback page."""

from __future__ import annotations

import pytest

from lockyard.cli.web.access import COOKIE, Access, AccessSettingError, host_name, is_loopback

TOKEN = "t0ken-of-sixteen-chars"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"])
def test_a_loopback_bind_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    assert Access.for_bind(host, None).token is None


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.4", "::", "example.org"])
def test_any_other_bind_refuses_to_start_without_a_token_and_says_how_to_give_one(
    host: str,
) -> None:
    with pytest.raises(AccessSettingError, match="--token TOKEN or set LOCKYARD_WEB_TOKEN"):
        Access.for_bind(host, None)
    with pytest.raises(AccessSettingError, match="--token"):
        Access.for_bind(host, "   ")
    assert Access.for_bind(host, TOKEN).token == TOKEN


@pytest.mark.parametrize("token", ["short", "has space in it 123", "semi;colon-0123456789"])
def test_a_weak_or_unsendable_token_is_refused(token: str) -> None:
    with pytest.raises(AccessSettingError):
        Access.for_bind("0.0.0.0", token)


def test_without_a_token_only_requests_naming_a_loopback_host_are_answered() -> None:
    access = Access.for_bind("127.0.0.1", None)
    assert access.allows({"host": "127.0.0.1:8765"}, None)
    assert access.allows({"host": "localhost:8765"}, None)
    assert access.allows({"host": "[::1]:8765"}, None)
    assert not access.allows({"host": "attacker.example:8765"}, None)  # DNS rebinding
    assert not access.allows({}, None)


def test_with_a_token_a_request_must_carry_it_by_query_header_or_cookie() -> None:
    access = Access.for_bind("0.0.0.0", TOKEN)
    assert not access.allows({"host": "127.0.0.1"}, None)
    assert not access.allows({}, "wrong-token-of-many-chars")
    assert access.allows({}, TOKEN)
    assert access.allows({"authorization": f"Bearer {TOKEN}"}, None)
    assert not access.allows({"authorization": f"Basic {TOKEN}"}, None)
    assert access.allows({"cookie": f"other=1; {COOKIE}={TOKEN}"}, None)
    assert not access.allows({"cookie": f'{COOKIE}="unterminated'}, None)
    assert not access.allows({}, "ünïcode")


def test_host_names_lose_their_port() -> None:
    assert host_name("127.0.0.1:80") == "127.0.0.1"
    assert host_name("[::1]:80") == "::1"
    assert host_name("::1") == "::1"
    assert host_name("[broken") == "[broken"
