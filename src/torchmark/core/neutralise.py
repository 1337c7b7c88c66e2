"""Text that leaves torchmark, made harmless for where it goes: names and labels come
from configs, traces and results files that others wrote (docs/security.md).

- a spreadsheet runs a CSV cell that starts with = + - @ (or a tab or carriage return)
  as a formula: such a cell gets a leading apostrophe;
- a terminal obeys escape sequences (a window title, the clipboard): control characters
  other than newline and tab are shown escaped;
- Markdown in a pull-request comment renders HTML and notifies @mentions: <, >, & are
  entities and @ is kept from mentioning.
"""

from __future__ import annotations

import re
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def csv_cell(value: Any) -> Any:
    """`value` for a CSV cell: a string a spreadsheet would take for a formula gets a
    leading apostrophe; numbers and other values as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def terminal_text(text: str) -> str:
    """`text` with every control character but newline and tab written as an escape
    (\\x1b), so that no sequence reaches the terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def markdown_text(text: str) -> str:
    """`text` for a Markdown table cell or line: HTML characters as entities, `@` kept
    from mentioning, `|` escaped, control characters escaped."""
    text = terminal_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("@", "@\u200b").replace("|", "\\|")
