"""A command line seen through (SPEC §18 "Shell commands"): tree-sitter-bash parses it, one
walker turns the tree into simple commands, reading the wrapper table (wrappers.py).

The analysis depends on the line's text only, so it is cached by text (a bounded LRU);
paths are resolved against the call's root and home later (pathmatch.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from app.policy.rules.walker import (
    MAX_DEPTH,
    MAX_LINE_CHARS,
    Analysis,
    SimpleCommand,
    Walker,
)

CACHE_SIZE = 2048
__all__ = ["CACHE_SIZE", "MAX_DEPTH", "MAX_LINE_CHARS", "Analysis", "SimpleCommand",
           "analyse"]


_cache: OrderedDict[str, Analysis] = OrderedDict()
_cache_lock = threading.Lock()


def analyse(line: str) -> Analysis:
    """The simple commands, paths and URLs of a command line (cached by its text)."""
    with _cache_lock:
        hit = _cache.get(line)
        if hit is not None:
            _cache.move_to_end(line)
            return hit
    walker = Walker()
    try:
        walker.line(line, 0)
        if "\\\n" in line:
            # bash joins a backslash-newline before it reads words (`r\<newline>m` is
            # rm); tree-sitter-bash reads it as a space. Both readings are kept: a deny
            # rule matches either, a classify rule must match both.
            walker.line(line.replace("\\\n", ""), 0)
    except RecursionError:
        walker.cannot(f"nested deeper than {MAX_DEPTH} levels")
    result = Analysis(tuple(walker.commands), tuple(walker.paths), tuple(walker.urls),
                      walker.opaque, walker.writes, walker.unanalysable, tuple(walker.cwds))
    with _cache_lock:
        _cache[line] = result
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return result
