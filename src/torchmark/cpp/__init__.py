"""C++ snippets: source generation, the persistent compile cache, the C++ timer."""

from torchmark.cpp.compile_cache import CompileError, SnippetBuilder, default_builder
from torchmark.cpp.cpp_timer import CppTimer, SnippetError

__all__ = ["CompileError", "CppTimer", "SnippetBuilder", "SnippetError", "default_builder"]
