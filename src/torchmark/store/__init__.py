"""The result store: every run kept with its provenance (SQLite by default, PostgreSQL for
a team); see store.py. `torchmark.store.open(url=None)` returns a Store."""

from torchmark.store.store import (
    HEAD,
    Store,
    StoreError,
    default_path,
    open,
    recording_off,
    resolve_url,
)

__all__ = ["HEAD", "Store", "StoreError", "default_path", "open", "recording_off",
           "resolve_url"]
