"""Who may read the page: the bind address rules and the token check (no I/O).

On a loopback address the page is for the people of this machine and needs no token, but
only requests that name a loopback host are answered (a web page elsewhere that re-points
its own name at 127.0.0.1 gets nothing). Any other address needs a token: given with
`--token` or `LOCKYARD_WEB_TOKEN`, checked in constant time, and carried after the first
visit (`/?token=...`) by an HttpOnly cookie, so the page's scripts never see it.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from dataclasses import dataclass
from http.cookies import SimpleCookie

TOKEN_ENV = "LOCKYARD_WEB_TOKEN"
COOKIE = "lockyard_web"
MIN_TOKEN_LENGTH = 16

TOKEN_CHARACTERS = re.compile(r"[A-Za-z0-9._~-]+")


class AccessSettingError(ValueError):
    """A bind address or token that cannot be used; the message says what to do."""


def is_loopback(host: str) -> bool:
    """Is `host` (a bind address or a Host header's name) this machine only?"""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """The rules of one server: its token (None: loopback only, no token)."""

    token: str | None

    @classmethod
    def for_bind(cls, host: str, token: str | None) -> Access:
        token = token.strip() if token is not None else None
        if token == "":
            token = None
        if token is None and not is_loopback(host):
            raise AccessSettingError(
                f"binding to {host} lets other machines read the page, so it needs a token: "
                f"pass --token TOKEN or set {TOKEN_ENV} (at least {MIN_TOKEN_LENGTH} "
                "characters: `python3 -c 'import secrets; print(secrets.token_urlsafe())'` "
                "makes one)"
            )
        if token is not None and not TOKEN_CHARACTERS.fullmatch(token):
            raise AccessSettingError(
                "the token may hold letters, digits and . _ ~ - only (it travels in an "
                "address and a cookie)"
            )
        if token is not None and len(token) < MIN_TOKEN_LENGTH:
            raise AccessSettingError(
                f"the token is {len(token)} characters long: use at least {MIN_TOKEN_LENGTH} "
                "(a guessable token protects nothing)"
            )
        return cls(token)

    def allows(self, headers: dict[str, str], query_token: str | None) -> bool:
        """Does this request carry the token (header, cookie or `?token=`), or need none
        and name a loopback host?"""
        if self.token is None:
            return is_loopback(host_name(headers.get("host", "")))
        offered = [query_token, bearer(headers.get("authorization")), cookie_token(headers)]
        return any(
            candidate is not None
            and hmac.compare_digest(candidate.encode("utf-8", "replace"), self.token.encode())
            for candidate in offered
        )


def host_name(host_header: str) -> str:
    """The name of a Host header, without its port (`[::1]:8765` -> `::1`)."""
    host = host_header.strip()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def cookie_token(headers: dict[str, str]) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header carries no token
        return None
    morsel = jar.get(COOKIE)
    return None if morsel is None else morsel.value
