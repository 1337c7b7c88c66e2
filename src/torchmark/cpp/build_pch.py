"""Build torch.h's precompiled header for C++ snippets (run in the background by the
compile cache: `python -m torchmark.cpp.build_pch`)."""

from __future__ import annotations

import sys

from torchmark.cpp.compile_cache import SnippetBuilder


def main() -> int:
    folder = SnippetBuilder(use_pch=True).build_pch()
    print(f"precompiled header: {folder}" if folder else "precompiled header: build failed")
    return 0 if folder else 1


if __name__ == "__main__":
    sys.exit(main())
