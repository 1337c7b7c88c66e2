"""Importing a user's module by name (a plugin, a fuzzer), from the current folder too."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType


def import_user_module(name: str) -> ModuleType:
    """`importlib.import_module(name)`, with the current folder searched as `python -m`
    searches it (an installed console script does not)."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(name)
