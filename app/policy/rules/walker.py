"""The walker (SPEC §18 "Shell commands"): one pass over tree-sitter-bash's tree of a
command line that collects its simple commands, paths, URLs and what cannot be seen
through, reading the wrapper table (wrappers.py) for commands that run commands."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from app.policy.rules.collect import Collector
from app.policy.rules.options import has_c, script_operand, skip_options
from app.policy.rules.parse import MAX_LINE_CHARS, parse
from app.policy.rules.variables import BINDERS, Bindings
from app.policy.rules.words import Word, group_words, literal_output, with_unknowns, word_of
from app.policy.rules.wrappers import (
    FIND_EXEC,
    GLOBAL_OPTIONS,
    NULL_DEVICES,
    OTHER_DIALECTS,
    PROXY_VARIABLES,
    SHELLS,
    SUBCOMMANDS,
    WRAPPERS,
    Wrapper,
)

MAX_DEPTH = 8
MAX_WORDS = 2000  # in all the simple commands of a line (a cost bound, as the budget)

_BARE_BACKTICK = re.compile(r"(?<!\\)`")
_BACKTICK_ESCAPE = re.compile(r"\\([$`\\])")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    words: tuple[str, ...]     # base name first, quotes and escapes removed
    tentative: bool = False    # one try where a wrapper's options hide the command
    transparent: bool = False  # a wrapper that runs its command as is (`nice`, `env`)


@dataclass(frozen=True, slots=True)
class Analysis:
    commands: tuple[SimpleCommand, ...] = ()
    # Path candidates: literal text, or with UNKNOWN for a variable or substitution and
    # the shell's glob characters kept (`glob` true).
    paths: tuple[tuple[str, bool], ...] = ()
    urls: tuple[str, ...] = ()  # words that are http(s) URLs (UNKNOWN where not known)
    opaque: str | None = None   # why no classify rule may apply
    writes: bool = False        # output redirected to a file
    unanalysable: str | None = None  # why every deny rule matches
    # Directories the line changes to (`cd sub && cat x`): its relative paths are read
    # against each as well as against the root; (text, dynamic) as for paths.
    cwds: tuple[tuple[str, bool], ...] = ()


class Walker(Collector):
    def __init__(self) -> None:
        super().__init__()
        self.commands: list[SimpleCommand] = []
        self.opaque: str | None = None
        self.writes = False
        self.unanalysable: str | None = None
        self.words = 0

    # -- outcomes ---------------------------------------------------------------------
    def cannot(self, why: str) -> None:
        self.unanalysable = self.unanalysable or why
        self.hide(why)

    def hide(self, why: str) -> None:
        self.opaque = self.opaque or why

    def deeper(self, depth: int) -> bool:
        if depth > MAX_DEPTH:
            self.cannot(f"nested deeper than {MAX_DEPTH} levels")
            return False
        return True

    # -- lines and statements ---------------------------------------------------------
    def line(self, text: str, depth: int) -> None:
        if not self.deeper(depth):
            return
        if len(text) > MAX_LINE_CHARS:
            self.cannot("too long")
            return
        if "\x00" in text:
            # The shell never sees past a NUL (a C string); what runs is not what is read.
            self.cannot("holds a NUL character")
            return
        tree = parse(text.encode("utf-8", "surrogatepass"))
        if tree is None:
            self.cannot("too costly to parse")
            return
        if tree.root_node.has_error:
            self.cannot("does not parse")
            return
        scope = Bindings()
        self.scopes.append(scope)
        try:
            self.statement(tree.root_node, depth)
        finally:
            self.scopes.pop()
        for word, at in scope.deferred:
            texts = scope.expand(word, at)
            if texts is None:
                self.add(with_unknowns(word), dynamic=True)
            for value, glob in texts or ():
                self.add(value, dynamic=glob)

    def statement(self, node: Node, depth: int, piped: bool = False) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, depth, piped=piped)
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            # Node objects are made anew on each access: compare their ids.
            redirects = [c for c in node.named_children
                         if body is None or c.id != body.id]
            if body is not None and body.type == "command":
                self.command(body, depth, piped=piped, extra=redirects)
            else:
                if body is not None:
                    self.statement(body, depth, piped)
                for r in redirects:
                    self.redirect(r, depth, shell=False)
        elif kind == "pipeline":
            parts = node.named_children
            for i, part in enumerate(parts):
                self.statement(part, depth, piped=piped or i > 0)
        elif kind in ("subshell", "compound_statement", "command_substitution",
                      "process_substitution"):
            if kind == "process_substitution" or (
                    kind == "command_substitution" and literal_output(node) is None):
                # `$(cat <<'EOF' ... EOF)` prints its here-document: a known word.
                self.hide("a substitution's output is a word of the line")
                text = node.text.decode("utf-8", "surrogateescape") if node.text else ""
                if text.startswith("`") and _BARE_BACKTICK.search(text, 1, len(text) - 1):
                    # tree-sitter-bash misreads "` cmd`" after another backtick
                    # substitution (its issue #278): one holding a bare backtick is not
                    # what bash reads.
                    self.cannot("a backtick substitution the parser misreads")
                    return
                if text.startswith("`") and "\\" in text:
                    # Inside backticks, \` \$ \\ lose their backslash before the command
                    # is read (so `echo \`rm x\`` runs rm): read the command as bash does.
                    self.line(_BACKTICK_ESCAPE.sub(r"\1", text[1:-1]), depth + 1)
                    return
            if self.deeper(depth + 1):
                for child in node.named_children:
                    self.statement(child, depth + 1)
        elif kind in ("declaration_command", "unset_command"):
            self.declaration(node, depth)
        elif kind == "variable_assignment":
            self.assignment(node, depth, bind=True)
        elif kind == "for_statement":
            self.for_loop(node, depth)
        elif kind == "variable_name":
            if node.text is not None:  # (( n++ )), [[ -v n ]]: set or read, not known
                self.scopes[-1].spoil(node.text.decode("utf-8", "surrogateescape"))
        elif kind in ("comment", "heredoc_body", "heredoc_start", "heredoc_end"):
            return
        elif kind in ("word", "string", "raw_string", "concatenation", "simple_expansion",
                      "expansion", "number", "arithmetic_expansion", "ansi_c_string",
                      "translated_string", "test_operator", "regex",
                      "extglob_pattern"):
            word_of([node], self.substitution(depth))  # a word outside a command
        else:
            # program, list, if/while/for/case, test and arithmetic commands, functions:
            # every statement and word inside, at the same depth.
            if kind in ("program", "list"):
                if any(c.type == "&" and not c.is_named for c in node.children):
                    self.hide("a background job")
            for child in node.named_children:
                self.statement(child, depth)

    def substitution(self, depth: int):  # noqa: ANN201 - a callback for words.py
        def walk(node: Node) -> None:
            self.statement(node, depth)
        return walk

    def assignment(self, node: Node, depth: int, *, bind: bool = False) -> None:
        """A value's substitutions run; a statement's own assignment binds the name."""
        children = node.named_children
        value = word_of(children[1:], self.substitution(depth)) if len(children) > 1 \
            else None
        if children and children[0].text and value is not None \
                and children[0].text.decode("utf-8", "replace").lower() in PROXY_VARIABLES:
            self.url(value)  # `https_proxy=http://evil.example curl ...` reaches that host
        if not bind or not children or children[0].text is None:
            return
        name = children[0].text.decode("utf-8", "surrogateescape")
        appends = any(c.type == "+=" for c in node.children if not c.is_named)
        arrays = any(c.type == "array" for c in children[1:])
        if children[0].type != "variable_name" or appends or arrays:
            self.scopes[-1].spoil(name)
        else:
            self.scopes[-1].bind(name, value or Word(""), node.start_byte)

    def for_loop(self, node: Node, depth: int) -> None:
        variable = node.child_by_field_name("variable")
        values: list[Node] = []
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "value":
                values.append(child)
        walk = self.substitution(depth)
        words = [word_of(group, walk) for group in group_words(values)]
        if variable is not None and variable.text is not None:
            name = variable.text.decode("utf-8", "surrogateescape")
            scope = self.scopes[-1]
            if not words:
                scope.spoil(name)  # `for x; do`: the positional parameters
            for w in words:
                scope.bind(name, w, node.start_byte)
        for i, child in enumerate(node.children):
            if child.is_named and node.field_name_for_child(i) not in ("variable", "value"):
                self.statement(child, depth)

    def declaration(self, node: Node, depth: int) -> None:
        words: list[str] = [node.children[0].type] if node.children else []
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assignment(child, depth, bind=True)
                if len(words) == 1 and words[0] in ("local", "declare", "typeset") \
                        and child.named_children and child.named_children[0].text:
                    self.scopes[-1].spoil(child.named_children[0].text.decode())
                words.append(child.text.decode("utf-8", "surrogateescape") if child.text
                             else "")
            else:
                if child.type == "variable_name" and child.text is not None:
                    self.scopes[-1].spoil(child.text.decode("utf-8", "surrogateescape"))
                words.append(word_of([child], self.substitution(depth)).text)
        self.commands.append(SimpleCommand(tuple(words)))

    # -- simple commands --------------------------------------------------------------
    def command(self, node: Node, depth: int, *, piped: bool,
                extra: list[Node] | None = None) -> None:
        walk = self.substitution(depth)
        args: list[Node] = []
        redirects: list[Node] = list(extra or [])
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assignment(child, depth)  # leading assignments are dropped
            elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                redirects.append(child)
            elif child.type == "command_name":
                args.extend(child.named_children)
            else:
                args.append(child)
        groups = group_words(args)
        self.words += len(groups)
        if self.words > MAX_WORDS:
            self.cannot(f"more than {MAX_WORDS} words")
            return
        words = [word_of(group, walk) for group in groups]
        if not words:
            for r in redirects:
                self.redirect(r, depth, shell=False)
            return
        name = words[0].text.rsplit("/", 1)[-1].lower() if words[0].literal else ""
        fed = name in SHELLS and script_operand(words[1:]) is None
        for r in redirects:
            self.redirect(r, depth, shell=fed)
        stdin_script = fed and piped and not any(
            r.type in ("heredoc_redirect", "herestring_redirect") for r in redirects)
        if stdin_script:
            self.cannot("a shell reads its script from a pipe")
        self.simple(words, depth)

    def simple(self, words: list[Word], depth: int, *, tentative: bool = False) -> None:
        if not self.deeper(depth):
            return
        head = words[0]
        if head.variables or head.substituted:
            self.cannot("the command name is a variable or a substitution")
            return
        if head.glob or head.brace:
            self.cannot("the command name is a glob")
            return
        name = head.text.rsplit("/", 1)[-1] if "/" in head.text.rstrip("/") else head.text
        if not name.isascii():
            self.hide("the command name is not ASCII")
        texts = (name, *(w.text for w in words[1:]))
        key = name.lower()
        self.words_of(key, words[1:])
        if name in BINDERS:
            for w in words[1:]:
                for part in w.text.split("="):
                    if part.isidentifier():
                        self.scopes[-1].spoil(part)
        wrapper, rest = WRAPPERS.get(key), words[1:]
        if wrapper is None and rest:
            wrapper = SUBCOMMANDS.get((key, rest[0].text))
            rest = rest[1:]
        if key in OTHER_DIALECTS and len(words) > 1:
            self.cannot(f"{name} is not a POSIX shell")
        found = self.unwrap(wrapper, rest, depth + 1, tentative) if wrapper else False
        # A shell's -c line is seen through as a wrapper's command is.
        transparent = bool(wrapper and found
                           and (wrapper.transparent or wrapper.how == "shell"))
        self.commands.append(SimpleCommand(texts, tentative, transparent))
        if key in GLOBAL_OPTIONS and len(words) > 1 and words[1].text.startswith(("-", "+")):
            for j in range(2, min(len(words), 16)):  # `git -C dir push` is `git push` too
                if not words[j].text.startswith(("-", "+")):
                    self.simple([head, *words[j:]], depth, tentative=True)

    def unwrap(self, w: Wrapper, rest: list[Word], depth: int, tentative: bool) -> bool:
        """Analyse the command `w` runs; True when there is one."""
        if w.how == "find":
            return self.find(rest, depth)
        if w.how == "shell":
            return self.shell(rest, depth)
        i, ambiguous, lines = skip_options(w, rest)
        for line in lines:
            if line.literal:
                self.line(line.text, depth)
            else:
                self.cannot("a wrapper runs a non-literal command line")
        if i is None or w.how == "options":
            return bool(lines)
        if not ambiguous:
            i += w.operands
            if i + 1 < len(rest) and rest[i].text in w.line_values:  # `flock f -c "..."`
                line = rest[i + 1]
                if line.literal:
                    self.line(line.text, depth)
                else:
                    self.cannot("a wrapper runs a non-literal command line")
                return True
        if i >= len(rest):
            return w.how == "xargs"
        if w.how == "line":
            if ambiguous or not all(x.literal for x in rest[i:]):
                self.cannot("eval or watch of a non-literal command")
                return True
            self.line(" ".join(x.text for x in rest[i:]), depth)
            return True
        if ambiguous:
            self.hide("a wrapper's options cannot be told apart from its command")
            for j in range(i, len(rest)):
                if not rest[j].text.startswith("-"):
                    self.simple(rest[j:], depth, tentative=True)
            return True
        self.simple(rest[i:], depth, tentative=tentative)
        return True

    def shell(self, rest: list[Word], depth: int) -> bool:
        operand = script_operand(rest)
        if operand is None:
            return False  # the script from its input (redirect(), command())
        script = rest[operand]
        if not has_c(rest[:operand]):
            if not script.literal:
                self.cannot("a shell runs a script named by a variable")
            return False  # a script file: a program like any other
        if not script.literal:
            self.cannot("a shell runs a non-literal command")
            return True
        self.line(script.text, depth)
        return True

    def find(self, rest: list[Word], depth: int) -> bool:
        found, i = False, 0
        while i < len(rest):
            if rest[i].text in FIND_EXEC:
                j = i + 1
                while j < len(rest) and rest[j].text not in (";", "+"):
                    j += 1
                if j > i + 1:
                    self.simple(rest[i + 1:j], depth)
                    found = True
                i = j
            i += 1
        return found

    # -- words: paths and URLs --------------------------------------------------------
    def redirect(self, node: Node, depth: int, *, shell: bool) -> None:
        walk = self.substitution(depth)
        if node.type == "herestring_redirect":
            value = word_of([c for c in node.named_children], walk)
            if shell:
                self.hide("a here-string feeds a shell")
                if value.literal:
                    self.line(value.text, depth + 1)
                else:
                    self.cannot("a shell reads a non-literal here-string")
            return
        if node.type == "heredoc_redirect":
            self.heredoc(node, depth, shell=shell)
            return
        op = next((c.text.decode() for c in node.children if not c.is_named and c.text), "")
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        if not targets:
            return
        target = word_of(targets, walk)
        if op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
            return
        self.candidates(target)
        if (op not in ("<", "<&") and target.text not in NULL_DEVICES) or op == "<>":
            self.writes = True

    def heredoc(self, node: Node, depth: int, *, shell: bool) -> None:
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        quoted = start is not None and start.text is not None and any(
            q in start.text.decode() for q in "'\"\\")
        literal = True
        if body is not None and not quoted:
            for child in body.named_children:
                if child.type != "heredoc_content":
                    literal = False
                    self.statement(child, depth)
        if not shell:
            return
        self.hide("a here-document feeds a shell")
        if not literal:
            self.cannot("a shell reads a non-literal here-document")
        elif body is not None and body.text is not None:
            self.line(body.text.decode("utf-8", "surrogateescape"), depth + 1)
