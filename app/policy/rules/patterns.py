"""Tool-name patterns, `command` patterns (word by word) and `args` values.

A tool pattern is a name with `*` for any run of characters. A command pattern is a list
of words: `*` alone matches any words (none included), `*` inside a word any run of
characters, and a last word ending in `:*` (Claude Code's prefix form, `git push:*`)
matches those words followed by anything. The command's first word is reduced to its base
name on both sides (`/bin/rm *` is `rm *`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

ANY_WORDS = None  # a `*` word


def glob_regex(pattern: str, *, flags: int = 0) -> re.Pattern[str]:
    """`*` is any run of characters (including none); everything else is literal."""
    return re.compile("\\A" + ".*".join(re.escape(p) for p in pattern.split("*")) + "\\Z",
                      flags | re.DOTALL)


@dataclass(frozen=True, slots=True)
class NamePattern:
    exact: str | None
    regex: re.Pattern[str] | None

    def matches(self, name: str) -> bool:
        if self.exact is not None:
            return name == self.exact
        assert self.regex is not None
        return self.regex.match(name) is not None


def name_pattern(pattern: str) -> NamePattern:
    if "*" not in pattern:
        return NamePattern(pattern, None)
    return NamePattern(None, glob_regex(pattern))


Item = str | re.Pattern[str] | None


@dataclass(frozen=True, slots=True)
class CommandPattern:
    text: str
    items: tuple[Item, ...]

    def matches(self, words: tuple[str, ...]) -> bool:
        return _match(self.items, 0, words, 0)


@dataclass(frozen=True, slots=True)
class CommandSet:
    """A rule's command patterns, indexed by their first word (most patterns have one)."""

    patterns: tuple[CommandPattern, ...]
    by_name: dict[str, tuple[CommandPattern, ...]]
    wild: tuple[CommandPattern, ...]  # patterns whose first word is not literal
    # The same with command names lower-cased: deny and ask rules match `RM` as `rm` (a
    # case-insensitive file system, macOS's default, runs /bin/rm for it).
    by_folded: dict[str, tuple[CommandPattern, ...]]
    wild_folded: tuple[CommandPattern, ...]

    def matches(self, words: tuple[str, ...], *, fold: bool = False) -> bool:
        if not words:
            return False
        if fold:
            words = (words[0].lower(), *words[1:])
            by_name, wild = self.by_folded, self.wild_folded
        else:
            by_name, wild = self.by_name, self.wild
        return any(p.matches(words) for p in by_name.get(words[0], ())) \
            or any(p.matches(words) for p in wild)


def _folded(p: CommandPattern) -> CommandPattern:
    first = p.items[0]
    if isinstance(first, str):
        first = first.lower()
    elif first is not None:
        first = re.compile(first.pattern, first.flags | re.IGNORECASE)
    return CommandPattern(p.text, (first, *p.items[1:]))


def _index(patterns: tuple[CommandPattern, ...]
           ) -> tuple[dict[str, tuple[CommandPattern, ...]], tuple[CommandPattern, ...]]:
    by_name: dict[str, list[CommandPattern]] = {}
    wild: list[CommandPattern] = []
    for p in patterns:
        if isinstance(p.items[0], str):
            by_name.setdefault(p.items[0], []).append(p)
        else:
            wild.append(p)
    return {k: tuple(v) for k, v in by_name.items()}, tuple(wild)


def command_set(patterns: tuple[CommandPattern, ...]) -> CommandSet:
    return CommandSet(patterns, *_index(patterns),
                      *_index(tuple(_folded(p) for p in patterns)))


def command_pattern(text: str) -> CommandPattern:
    """Compile a command pattern; ValueError for one with no words."""
    words = text.split()
    if not words:
        raise ValueError("a command pattern needs at least one word")
    prefix = False
    if words[-1].endswith(":*"):
        words[-1] = words[-1][:-2]
        prefix = True
        if not words[-1]:
            words.pop()
    if words and "/" in words[0].rstrip("/") and words[0] != "*":
        words[0] = words[0].rsplit("/", 1)[-1]
    items: list[Item] = []
    for word in words:
        if word == "*":
            items.append(ANY_WORDS)
        elif "*" in word:
            items.append(glob_regex(word))
        else:
            items.append(word)
    if prefix:
        items.append(ANY_WORDS)
    if not items:
        raise ValueError("a command pattern needs at least one word")
    return CommandPattern(text, tuple(items))


def _match(items: tuple[Item, ...], i: int, words: tuple[str, ...], j: int) -> bool:
    while i < len(items):
        item = items[i]
        if item is ANY_WORDS:
            if i == len(items) - 1:
                return True
            return any(_match(items, i + 1, words, k) for k in range(j, len(words) + 1))
        if j >= len(words):
            return False
        if isinstance(item, str):
            if item != words[j]:
                return False
        elif item.match(words[j]) is None:
            return False
        i += 1
        j += 1
    return j == len(words)


@dataclass(frozen=True, slots=True)
class ArgCondition:
    name: str
    value: Any
    regex: re.Pattern[str] | None  # string values with `*`

    def holds(self, args: Any) -> bool:
        if not isinstance(args, dict) or self.name not in args:
            return False
        actual = args[self.name]
        if self.regex is not None:
            return isinstance(actual, str) and self.regex.match(actual) is not None
        if isinstance(self.value, bool) or isinstance(actual, bool):
            return actual is self.value
        if isinstance(self.value, int | float) and isinstance(actual, int | float):
            return actual == self.value
        return type(actual) is type(self.value) and actual == self.value


@lru_cache(maxsize=1024, typed=True)  # typed: True and 1 are different values
def arg_condition(name: str, value: Any) -> ArgCondition:
    regex = glob_regex(value) if isinstance(value, str) and "*" in value else None
    return ArgCondition(name, value, regex)
