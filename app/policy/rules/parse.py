"""tree-sitter-bash, one parser per thread, and a budget on what a parse may cost."""

from __future__ import annotations

import threading

import tree_sitter_bash
from tree_sitter import Language, Parser, Tree

MAX_LINE_CHARS = 100_000
PARSE_BUDGET = 1000  # tree-sitter progress reports: a line of a script makes about one
SMALL_LINE = 1024   # shorter lines are parsed without counting (cheap whatever their shape)

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()  # a tree-sitter Parser is not to be shared between threads


def parse(source: bytes) -> Tree | None:
    """The tree, or None when parsing takes more than PARSE_BUDGET progress reports.

    tree-sitter-bash is slow on some shapes (a long `a | b | ...` costs it about 40 us a
    command); the budget counts tree-sitter's own progress reports, not time, so a line
    gets the same answer on a busy machine: a pipeline of 10,000 commands is refused
    (cannot be analysed, about 150 ms of parsing at most), a script of a few hundred lines
    or a here-document of thousands is not."""
    parser = _parser()
    if len(source) < SMALL_LINE:
        return parser.parse(source)
    reports = 0

    def read(offset: int, _point: object) -> bytes:
        return source[offset:offset + 65536]

    def progress(_offset: int, _has_error: bool) -> bool:
        nonlocal reports
        reports += 1
        return reports > PARSE_BUDGET

    try:
        return parser.parse(read, progress_callback=progress)
    except ValueError:  # cancelled
        parser.reset()
        return None


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser
