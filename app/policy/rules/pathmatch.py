"""`paths` conditions (SPEC §18 "Paths"): gitignore-style patterns as Claude Code writes
them, matched against a call's paths resolved lexically against the sandbox root.

Pattern forms: `.env`, `*.pem`, `**/.env` (no inner slash: anywhere), `/x` and `./x` and
`src/x` (an inner slash: under the root), `//x` (absolute), `~/x` (under HOME); `!x`
re-includes (the last pattern that matches a path decides, as in .gitignore). Each pattern
becomes pathspec's gitignore regex (GitIgnoreSpecPattern), so `x/` and `x/**` follow git.

For deny and ask rules the match leans to matching (fail closed): case is ignored; an
"anywhere" pattern also matches outside the root; `dir/**` also matches `dir` itself (a
copy of the directory carries what it holds); a path that cannot be resolved (`~` with no
HOME, a variable, a substitution) matches; a glob (`cat .en*`) matches when some path
could match both it and the pattern; with HOME unknown, a `~/x` pattern matches a path
that would match it under any of the path's directories as home (`/a/.ssh/k` for
`~/.ssh/**`). Classify rules match only what is certain.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from app.policy.rules.globs import glob_tokens, intersects, pattern_tokens
from app.policy.rules.words import UNKNOWN

_HOME_VAR = re.compile(r"\$\{HOME\}|\$HOME(?![A-Za-z0-9_])")


@dataclass(frozen=True, slots=True)
class PathPattern:
    text: str
    base: str            # "any" | "root" | "abs" | "home"
    include: bool        # False for `!x`
    body: str            # the pattern without its base marker, gitignore spelling
    exact: re.Pattern[str]
    folded: re.Pattern[str]  # case-insensitive (deny/ask)


def path_pattern(text: str) -> PathPattern:
    """Compile one pattern; ValueError if it is not a pattern."""
    include = not text.startswith("!")
    body = text if include else text[1:]
    if body.startswith("//"):
        base, body = "abs", "/" + body[2:].lstrip("/")
    elif body == "~" or body.startswith("~/"):
        base, body = "home", "/" + body[2:]
    elif body.startswith("./"):
        base, body = "root", "/" + body[2:]
    elif body.startswith("/"):
        base = "root"
    elif "/" in body.rstrip("/") and not body.startswith("**/"):
        base, body = "root", "/" + body
    else:
        base = "any"
    if body in ("", "/"):
        body = "/**"
    regex = GitIgnoreSpecPattern(body).regex
    if regex is None:
        raise ValueError("not a path pattern")
    return PathPattern(text, base, include, body, re.compile(regex.pattern),
                       re.compile(regex.pattern, re.IGNORECASE))


def _under(path: str, base: str) -> str | None:
    """`path` relative to `base` (both absolute and normal), or None if outside it;
    `.` for the base itself."""
    if path == base:
        return "."
    if base == "/":
        return path[1:]
    if path.startswith(base + "/"):
        return path[len(base) + 1:]
    return None


def resolve(text: str, root: str | None, home: str | None) -> str | None:
    """The absolute, normal path `text` names; None when it cannot be told (`~` or
    `$HOME` with no home, `~user`, a relative path with no root)."""
    if "$" in text:
        if _HOME_VAR.search(text):
            if not home:
                return None
            text = _HOME_VAR.sub(lambda _: home, text)
    if text.startswith("~"):
        if not home or not (text == "~" or text.startswith("~/")):
            return None
        text = home + text[1:]
    if not text.startswith("/"):
        if not root or not root.startswith("/"):
            return None
        text = root + "/" + text
    text = posixpath.normpath(text.replace("\\", "/"))
    return "/" + text.lstrip("/")


def _candidates(pattern: PathPattern, path: str, root: str | None, home: str | None,
                lenient: bool) -> list[str] | None:
    """The strings the pattern's regex is tried on; None: cannot be told."""
    if pattern.base == "abs":
        return [path[1:]]
    if pattern.base == "home":
        if not home:
            # Home unknown: the path matches if it would under SOME home, i.e. some
            # directory of the path (`/` included) could be it. Every home's `.ssh/x` is
            # matched so, and a path with no such tail is not (a deny on `~/.ssh/**` then
            # stops `/root/.ssh/id_rsa` and `/w/x/.ssh/k`, not every file call).
            return _tails(path) if lenient else None
        rel = _under(path, posixpath.normpath(home))
        return [] if rel is None else [rel]
    rel = _under(path, posixpath.normpath(root)) if root else None
    if pattern.base == "root":
        if not root:
            return None
        return [] if rel is None else [rel]
    if rel is not None:
        return [rel]
    return [path[1:]] if lenient else []


def _tails(path: str) -> list[str]:
    """`path` relative to each of its directories: /a/b/c -> a/b/c, b/c, c."""
    parts = path.strip("/").split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


def matches_path(patterns: tuple[PathPattern, ...], path: str, *, root: str | None,
                 home: str | None, lenient: bool) -> bool:
    """Whether a resolved path matches the list (the last matching pattern decides).
    `lenient` is for deny and ask rules (see the module's docstring)."""
    decided = False
    for pattern in patterns:
        cands = _candidates(pattern, path, root, home, lenient)
        if cands is None:
            hit = lenient
        else:
            regex = pattern.folded if lenient else pattern.exact
            hit = any(regex.match(c) for c in cands)
            if not hit and lenient and pattern.body.endswith(("/**", "/")):
                hit = any(regex.match(c + "/") for c in cands if c != ".")
        if hit:
            decided = pattern.include
    return decided


def glob_may_match(patterns: tuple[PathPattern, ...], text: str, *, root: str | None,
                   home: str | None) -> bool:
    """Deny/ask: whether a word with globs or unknown parts could name a path an include
    pattern matches (negations are not trusted to exclude what is not known)."""
    word = _absolute_glob(text, root, home)
    if word is None:
        return True
    for pattern in patterns:
        if not pattern.include:
            continue
        for prefix in _pattern_prefixes(pattern, root, home):
            if prefix is None or intersects(word, pattern_tokens(prefix, pattern.body)):
                return True
    return False


def _absolute_glob(text: str, root: str | None, home: str | None) -> tuple | None:
    if text.startswith(UNKNOWN):
        return glob_tokens(UNKNOWN + text)
    resolved_home = text
    if "$" in text and _HOME_VAR.search(text):
        if not home:
            return None
        resolved_home = _HOME_VAR.sub(lambda _: home, text)
    if resolved_home.startswith("~"):
        if not home or not (resolved_home == "~" or resolved_home.startswith("~/")):
            return None
        resolved_home = home + resolved_home[1:]
    if not resolved_home.startswith("/"):
        if not root:
            return None
        resolved_home = root.rstrip("/") + "/" + resolved_home
    return glob_tokens(_lexical(resolved_home))


def _lexical(text: str) -> str:
    """`.` and `..` removed where they are literal components."""
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and UNKNOWN not in parts[-1]:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def _pattern_prefixes(pattern: PathPattern, root: str | None,
                      home: str | None) -> list[str | None]:
    if pattern.base == "abs":
        return [""]
    if pattern.base == "home":
        return [home.rstrip("/") if home else None]
    if pattern.base == "root":
        return [root.rstrip("/") if root else None]
    return ["\x02"]  # anywhere


@dataclass(frozen=True, slots=True)
class PathSet:
    """A rule's path patterns, with one regex of them all: a path none of whose readings
    (under the root, under home, absolute) it matches is decided at once."""

    patterns: tuple[PathPattern, ...]
    any_of: re.Pattern[str]
    bases: frozenset[str]


def path_set(patterns: tuple[PathPattern, ...]) -> PathSet:
    alternatives = "|".join(p.folded.pattern.replace("(?P<ps_d>", "(?:") for p in patterns)
    return PathSet(patterns, re.compile(f"(?:{alternatives})", re.IGNORECASE),
                   frozenset(p.base for p in patterns))


def readings(path: str, root: str | None, home: str | None) -> tuple[str, ...]:
    """Every string a pattern may be tried on for `path`: absolute (without its first
    `/`), under the root, under home."""
    out = [path[1:]]
    for base in (root, home):
        if base:
            rel = _under(path, posixpath.normpath(base))
            if rel is not None:
                out.append(rel)
    return tuple(out)


def may_match(paths: PathSet, reads: tuple[str, ...], *, root: str | None,
              home: str | None, lenient: bool) -> bool:
    """False when no pattern can match a path of these readings (the common case,
    decided by one regex)."""
    if lenient and ((not home and "home" in paths.bases)
                    or (not root and "root" in paths.bases)):
        return True
    search = paths.any_of.match
    return any(search(r) or (lenient and search(r + "/")) for r in reads)


@lru_cache(maxsize=256)
def compiled(patterns: tuple[str, ...]) -> tuple[PathPattern, ...]:
    return tuple(path_pattern(p) for p in patterns)
