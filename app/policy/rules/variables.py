"""Variables a command line sets itself (`F=.env; cat $F`, `for f in *.py; do wc $f; done`):
their values are known, so a path made of them is resolved instead of counting as unknown.

Flow is ignored but not trusted: a variable's values are all those the line gives it; it
stays unknown if the line also gives it a value toolgate cannot read (`F=$(x)`, `read F`,
`export F`, `((F++))`, `F+=x`, an array), or if a use comes before its first assignment
(the first time round, the value is the environment's). One scope per parsed line: a
`sh -c '...'` or `eval` line starts with nothing known, as its shell does.
"""

from __future__ import annotations

from app.policy.rules.words import Word

MAX_EXPANSIONS = 16
# Commands that set the variables named by their arguments.
BINDERS = frozenset({"read", "mapfile", "readarray", "getopts", "printf", "let", "local",
                     "declare", "typeset", "export", "readonly", "unset", "eval", "source",
                     "."})


class Bindings:
    __slots__ = ("values", "first", "deferred")

    def __init__(self) -> None:
        # name -> [(value text, value holds a glob)], or None: not known
        self.values: dict[str, list[tuple[str, bool]] | None] = {}
        self.first: dict[str, int] = {}
        self.deferred: list[tuple[Word, int]] = []

    def bind(self, name: str, value: Word | None, at: int) -> None:
        """`name` takes `value` (None: a value that cannot be read) at byte `at`."""
        self.first[name] = min(at, self.first.get(name, at))
        known = self.values.get(name, [])
        if value is None or known is None or not _readable(value):
            self.values[name] = None
            return
        known.append((value.text, value.glob))
        self.values[name] = known

    def spoil(self, name: str) -> None:
        self.values[name] = None
        self.first.setdefault(name, -1)

    def expand(self, word: Word, at: int) -> list[tuple[str, bool]] | None:
        """The texts `word` may have, each with whether it holds a glob; None if unknown."""
        texts = [(word.text, word.glob)]
        for name in dict.fromkeys(word.variables):
            if name == "HOME":
                continue
            values = self.values.get(name)
            if values is None or at <= self.first.get(name, at):
                return None
            marker = "${" + name + "}"
            texts = [(t.replace(marker, v), g or vg) for t, g in texts for v, vg in values]
            if len(texts) > MAX_EXPANSIONS:
                return None
        return texts


def _readable(value: Word) -> bool:
    return not (value.substituted or value.brace
                or any(name != "HOME" for name in value.variables))
