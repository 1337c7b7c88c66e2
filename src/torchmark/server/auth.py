"""Who may read and who may write. Without a token (the default, bound to a loopback
address) everyone on this machine may read and nobody may write; with a token every
request must carry it (an `Authorization: Bearer TOKEN` header, the session cookie, or
`?token=TOKEN` once, which sets the cookie and redirects to the address without it) and
its holder may acknowledge or dismiss a regression. The token is compared in constant
time and never shown."""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path

from torchmark.core.errors import UsageError

COOKIE = "torchmark_token"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or localhost (reachable from this machine
    only)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(header: str | None) -> str:
    """The host a request's Host header names, in lower case, without its port or a
    final dot ("" for none): `[::1]:8000` -> `::1`, `LocalHost.:8000` -> `localhost`."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else ""
    host = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
    return host.removesuffix(".")  # `localhost.`: the same name


def read_token(token: str | None, token_file: str | None) -> str | None:
    """The token given, or the first line of the token file (which must be readable by
    its owner only); a UsageError for a short token (or one of spaces, or of one
    character again and again) or a file others may read."""
    if token_file is not None:
        path = Path(token_file)
        try:
            mode = path.stat().st_mode
            token = path.read_text().splitlines()[0].strip() if path.stat().st_size else ""
        except (OSError, IndexError):
            raise UsageError(f"--token-file {token_file}: cannot be read") from None
        if mode & 0o077:
            raise UsageError(f"--token-file {token_file}: readable by others (chmod 600 it)")
    if token is not None and (len(token) < MIN_TOKEN_CHARS or len(set(token)) < 4 or
                              any(ch.isspace() or not ch.isprintable() for ch in token)):
        raise UsageError(f"the token must be at least {MIN_TOKEN_CHARS} characters, of 4 "
                         "different ones at least, no space (`python -c 'import secrets; "
                         "print(secrets.token_urlsafe())'`)")
    return token


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if not is_loopback(host) and token is None:
        raise UsageError(f"--host {host} reaches beyond this machine: give --token or "
                         "--token-file (every request must then carry it)")


def matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def env_token() -> str | None:
    """$TORCHMARK_SERVE_TOKEN, where set."""
    return os.environ.get("TORCHMARK_SERVE_TOKEN") or None
