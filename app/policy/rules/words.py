"""A shell word's value after quote removal and escapes, from tree-sitter-bash nodes.

A word is built from pieces: literal text (quoted or not), variables and substitutions.
What the rules need of it: its text (variables kept as `${NAME}`, substitutions as `$(...)`),
whether its value is known when the line is read (no variable, no substitution), and
whether unquoted glob or brace characters may turn it into other words.
Substitutions inside a word are commands too: they are handed back to the walker.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

GLOB_CHARS = frozenset("*?[")
UNKNOWN = "\x01"  # in a path or host: a part whose value is not known when the line is read
# Unquoted `{a,b}` or `{1..3}` (quoted characters are NUL in the shape it is searched in).
_BRACE = re.compile(r"\{[^{}\x00]*(?:,|\.\.)[^{}\x00]*\}")
# Escapes inside double quotes (bash): only these characters lose their backslash.
_DQ_ESCAPES = re.compile(r"\\([$`\"\\\n])")
_ANSI_C_CONTROL = re.compile(r"\\c(.)")


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    variables: tuple[str, ...] = ()  # names of expanded variables (`${NAME}` in text)
    substituted: bool = False        # holds a command/process/arithmetic substitution
    glob: bool = False               # an unquoted *, ? or [ (pathname expansion)
    brace: bool = False              # an unquoted {a,b} (brace expansion)
    quoted_start: bool = False       # the first character was quoted (`"~"` is no tilde)
    start: int = 0                   # byte offset in the line it was read from

    @property
    def literal(self) -> bool:
        """Known when the line is read: what the shell passes is exactly `text`."""
        return not (self.variables or self.substituted or self.glob or self.brace)


class _Builder:
    __slots__ = ("parts", "shape", "variables", "substituted", "glob", "quoted_start")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.shape: list[str] = []  # unquoted text as it is, quoted text as NULs
        self.variables: list[str] = []
        self.substituted = False
        self.glob = False
        self.quoted_start: bool | None = None

    def add(self, text: str, *, quoted: bool) -> None:
        if not text:
            return
        if self.quoted_start is None:
            self.quoted_start = quoted
        self.parts.append(text)
        self.shape.append("\x00" * len(text) if quoted else text)

    def opaque(self, text: str, *, quoted: bool) -> None:
        """A variable or substitution: its value is not known."""
        if self.quoted_start is None:
            self.quoted_start = quoted
        self.parts.append(text)
        self.shape.append("\x00")

    def unquoted(self, raw: str) -> None:
        """Unquoted literal source: a backslash quotes the next character (and a
        backslash-newline disappears)."""
        out: list[str] = []
        i, n = 0, len(raw)
        while i < n:
            c = raw[i]
            if c == "\\" and i + 1 < n:
                if out:
                    self.add("".join(out), quoted=False)
                    out = []
                if raw[i + 1] != "\n":
                    self.add(raw[i + 1], quoted=True)
                i += 2
                continue
            if c in GLOB_CHARS:
                self.glob = True
            out.append(c)
            i += 1
        self.add("".join(out), quoted=False)

    def build(self, start: int = 0) -> Word:
        brace = bool(_BRACE.search("".join(self.shape)))
        return Word("".join(self.parts), tuple(self.variables), self.substituted,
                    self.glob, brace, bool(self.quoted_start), start)


def _ansi_c(raw: str) -> str:
    """The value of `$'...'` (bash's ANSI-C quoting)."""
    body = raw[2:-1] if raw.endswith("'") else raw[2:]
    body = _ANSI_C_CONTROL.sub(lambda m: chr(ord(m.group(1).upper()) ^ 0x40), body)
    try:
        return codecs.decode(body.replace("\\'", "'"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


Walk = Callable[[Node], None]


def _piece(node: Node, b: _Builder, walk: Walk, *, in_quotes: bool = False) -> None:
    kind = node.type
    text = node.text.decode("utf-8", "surrogateescape") if node.text is not None else ""
    if kind in ("word", "number", "extglob_pattern", "special_variable_name"):
        if in_quotes:
            b.add(text, quoted=True)
        else:
            b.unquoted(text)
    elif kind == "raw_string":
        b.add(text[1:-1], quoted=True)
    elif kind == "ansi_c_string":
        b.add(_ansi_c(text), quoted=True)
    elif kind == "string_content":
        b.add(_DQ_ESCAPES.sub(r"\1", text).replace("\\\n", ""), quoted=True)
    elif kind in ("string", "translated_string"):
        if b.quoted_start is None:
            b.quoted_start = True
        for child in node.named_children:
            _piece(child, b, walk, in_quotes=True)
        if not node.named_children:
            b.add("", quoted=True)
    elif kind in ("simple_expansion", "expansion"):
        name = next((c.text.decode() for c in node.named_children
                     if c.type in ("variable_name", "special_variable_name")
                     and c.text is not None), "?")
        # ${x:-$(cmd)}, ${x/$(a)/b}: whatever the expansion holds may run.
        for child in node.named_children:
            if child.type not in ("variable_name", "special_variable_name"):
                _substitutions(child, walk, b)
        b.variables.append(name)
        b.opaque("${" + name + "}", quoted=in_quotes)
    elif kind in ("command_substitution", "process_substitution"):
        walk(node)
        output = literal_output(node) if kind == "command_substitution" else None
        if output is None:
            b.substituted = True
            b.opaque(text, quoted=in_quotes)
        else:
            b.add(output, quoted=True)
    elif kind == "arithmetic_expansion":
        b.substituted = True
        b.opaque(text, quoted=in_quotes)
        _substitutions(node, walk, b)
    elif kind == "concatenation":
        for child in node.children:
            _piece(child, b, walk, in_quotes=in_quotes)
    elif kind == "brace_expression":
        b.unquoted(text)
    elif not node.is_named:
        # `$` before a translated string, the braces of a concatenation...
        if text != "$":
            b.unquoted(text) if not in_quotes else b.add(text, quoted=True)
    else:
        b.substituted = True  # a node this reader does not know: its value is unknown
        b.opaque(text, quoted=in_quotes)
        _substitutions(node, walk, b)


def literal_output(node: Node) -> str | None:
    """What `$(cat <<'EOF' ... EOF)` prints, known when the line is read: the here-document
    (quoted delimiter, or no expansion in it), its trailing newlines removed as a
    substitution removes them. Claude Code writes every commit message this way. None for
    any other substitution."""
    statements = node.named_children
    if len(statements) != 1 or statements[0].type != "redirected_statement":
        return None
    parts = statements[0].named_children
    if len(parts) != 2 or parts[0].type != "command" or parts[1].type != "heredoc_redirect":
        return None
    command, heredoc = parts
    if [c.type for c in command.named_children] != ["command_name"] \
            or command.text != b"cat":
        return None
    start = next((c for c in heredoc.named_children if c.type == "heredoc_start"), None)
    body = next((c for c in heredoc.named_children if c.type == "heredoc_body"), None)
    if start is None or body is None or body.text is None or start.text is None:
        return None
    quoted = any(q in start.text for q in (b"'", b'"', b"\\"))
    if not quoted and any(c.type != "heredoc_content" for c in body.named_children):
        return None
    strip_tabs = any(c.type == "<<-" for c in heredoc.children if not c.is_named)
    text = body.text.decode("utf-8", "surrogateescape")
    if strip_tabs:
        text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
    return text.rstrip("\n")


def _substitutions(node: Node, walk: Walk, b: _Builder) -> None:
    """Commands hidden inside an expansion or an arithmetic expression."""
    if node.type in ("command_substitution", "process_substitution"):
        b.substituted = True
        walk(node)
        return
    for child in node.named_children:
        _substitutions(child, walk, b)


def word_of(nodes: list[Node], walk: Walk) -> Word:
    """The word made of adjacent nodes (`$"t"` is two nodes with no space between)."""
    b = _Builder()
    for node in nodes:
        _piece(node, b, walk)
    return b.build(nodes[0].start_byte if nodes else 0)


def group_words(nodes: list[Node]) -> list[list[Node]]:
    """Adjacent argument nodes (no space between) form one word."""
    groups: list[list[Node]] = []
    end = -1
    for node in nodes:
        if groups and node.start_byte == end:
            groups[-1].append(node)
        else:
            groups.append([node])
        end = node.end_byte
    return groups


def with_unknowns(w: Word) -> str:
    """The word's text with each variable or substitution as UNKNOWN (HOME kept)."""
    text = w.text
    for name in set(w.variables):
        if name != "HOME":
            text = text.replace("${" + name + "}", UNKNOWN)
    if w.substituted:
        # Substitutions are kept as their source text; it is not a value.
        out: list[str] = []
        i = 0
        while i < len(text):
            if text.startswith(("$(", "<(", ">("), i) or text[i] == "`":
                out.append(UNKNOWN)
                close = closing(text, i)
                i = close + 1
                continue
            out.append(text[i])
            i += 1
        text = "".join(out)
    if w.brace:
        text = UNKNOWN
    return text


def closing(text: str, i: int) -> int:
    if text[i] == "`":
        end = text.find("`", i + 1)
        return len(text) if end < 0 else end
    level = 0
    for j in range(i + 1, len(text)):
        if text[j] == "(":
            level += 1
        elif text[j] == ")":
            level -= 1
            if level == 0:
                return j
    return len(text)
