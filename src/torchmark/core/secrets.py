"""Secrets kept out of what torchmark stores, prints or ships: the password of a URL
(`postgresql+psycopg://user:PASSWORD@host/db`, or in its query string as libpq takes
it, `?password=PASSWORD`) and the value of a token option are masked (`***`) in command
lines and messages."""

from __future__ import annotations

import re
from collections.abc import Sequence

MASK = "***"
# scheme://user:password@ -> scheme://user:***@ (also with an empty user)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)[^@\s]*(@)")
def _spelled(word: str) -> str:
    """A pattern of `word` with any of its letters percent-encoded."""
    return "".join(f"(?:{c}|%{ord(c):02x})" for c in word)


# ...?password=secret&... and sslpassword= (libpq's parameters, which psycopg passes on),
# their names' letters also as %XX (SQLAlchemy decodes them)
_QUERY_PASSWORD = re.compile(rf"([?&](?:{_spelled('ssl')})?{_spelled('password')}=)[^&\s]*",
                             re.IGNORECASE)
# options whose value is a secret, as `--token VALUE` or `--token=VALUE`
SECRET_OPTIONS = ("--token", "--password")


def mask(text: str) -> str:
    """`text` with every URL's password (before its host or in its query string)
    replaced by ***."""
    text = _URL_PASSWORD.sub(rf"\g<1>{MASK}\g<2>", text)
    return _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", text)


def mask_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line with URL passwords and the values of SECRET_OPTIONS masked."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        option, sep, _ = arg.partition("=")
        if option in SECRET_OPTIONS:
            if sep:
                out.append(f"{option}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(mask(arg))
    return tuple(out)
