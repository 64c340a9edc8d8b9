"""Sandbox path containment (seed 003): pure string normalisation, no filesystem access.

A path argument is checked before and after `$name` / `${name}` resolution from the
context's variables, so a variable cannot smuggle a path outside the sandbox root. Anything
ambiguous (NUL or control bytes, `~`, percent-encoding of a path character, an unresolvable
variable, a missing or relative root, a root with `..`) is treated as an escape: the check
fails closed.

Two readings of every value are checked, and both must stay inside the root: the text as
sent, and its Unicode NFKC form (so `．．／` and `‥/`, which a handler or a filesystem may
read as `../`, are caught), variables resolved in each reading.

Percent-encoding (docs/registry.md, "Sandbox paths"): a value holding `%` followed by two
hex digits is percent-decoded, repeatedly, at most MAX_DECODE_ROUNDS times (as UTF-8); it is
refused when it is still encoded after that, when the bytes are not UTF-8, or when the
decoded text (NFKC-normalised) holds a path character (`.`, `/`, `\\`, `~`, `$` or a
control character) the undecoded text does not. `%41` is a file name; `%2e%2e`, `%252e` and
`%ef%bc%8e` (a full-width dot) are refused. `%u` escapes (`%u002e`) are refused outright.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from urllib.parse import unquote

_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_LEFTOVER = re.compile(r"\$(?:\{|[A-Za-z_])")
_SLASHES = re.compile(r"/+")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PERCENT_U = re.compile(r"%u[0-9A-Fa-f]{4}", re.IGNORECASE)
_SEPARATORS = re.compile(r"[/\\]")

# How many times a value is percent-decoded before what is left counts as still encoded.
MAX_DECODE_ROUNDS = 3
# Characters that change what a path means; percent-encoding one of them is refused.
PATH_CHARACTERS = frozenset("./\\~$") | frozenset(map(chr, [*range(32), 127]))

BEFORE = "before variable resolution"
AFTER = "after variable resolution"
NFKC_READING = " (read as NFKC)"


class PathEscape(Exception):
    """Raised with a human-readable reason when a path is not safely inside the root."""


def nfkc(text: str) -> str:
    """Unicode NFKC (ASCII is its own NFKC form, checked first: the common case)."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def normalise(path: str) -> str:
    """Collapse `.`, `..` and duplicate separators; backslashes count as separators."""
    path = _SLASHES.sub("/", path.replace("\\", "/"))
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//"; the slash collapse above already removed it.
    return normal


def percent_decoded(text: str) -> str:
    """`text` percent-decoded until nothing decodable is left, at most MAX_DECODE_ROUNDS
    times; PathEscape when it is encoded deeper, holds bytes that are not UTF-8, or holds a
    `%u` escape."""
    if "%" not in text:
        return text
    if _PERCENT_U.search(text):
        raise PathEscape("holds a %u escape")
    for _ in range(MAX_DECODE_ROUNDS):
        if not _PERCENT.search(text):
            return text
        try:
            text = unquote(text, errors="strict")
        except UnicodeDecodeError:
            raise PathEscape("holds percent-encoded bytes that are not UTF-8") from None
        if _PERCENT_U.search(text):
            raise PathEscape("holds a %u escape once percent-decoded")
    if _PERCENT.search(text):
        raise PathEscape(f"is still percent-encoded after {MAX_DECODE_ROUNDS} rounds of "
                         "decoding")
    return text


def _path_characters(text: str) -> list[str]:
    return [ch for ch in text if ch in PATH_CHARACTERS]


def root_refusal(root: str) -> str | None:
    """Why `root` may not be a sandbox root because of what it climbs to, or None: a `..`
    segment as sent, as NFKC reads it, or once percent-decoded (`/sandbox/..` would
    silently be `/`). The door (app/authorize/schemas.py, wire.py) refuses such a root
    with a 422; the core refuses to check paths against it."""
    if ".." not in root and "%" not in root and root.isascii():
        return None  # the common case, decided without building the readings
    folded = nfkc(root)
    readings = [("", root), (" as NFKC reads it", folded)]
    try:
        readings.append((" once percent-decoded", nfkc(percent_decoded(folded))))
    except PathEscape as escape:
        return f"must not be percent-encoded this way: it {escape}"
    for how, text in readings:
        if ".." in _SEPARATORS.split(text):
            return f"must not contain a '..' segment{how}"
    return None


def _inside(root: str, candidate: str) -> bool:
    # Backslashes are separators before the join too: "\\etc" is absolute, like "/etc".
    joined = normalise(posixpath.join(root, candidate.replace("\\", "/")))
    return joined == root or joined.startswith(root.rstrip("/") + "/")


def _screen(value: str, stage: str) -> None:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise PathEscape(f"contains a control character {stage}")
    if value.startswith("~"):
        raise PathEscape(f"starts with '~' {stage}")
    if "%" in value:
        try:
            decoded = nfkc(percent_decoded(value))
        except PathEscape as escape:
            raise PathEscape(f"{escape} {stage}") from None
        if _path_characters(decoded) != _path_characters(nfkc(value)):
            # PATH_CHARACTERS: '.', '/', '\\', '~', '$' and control characters.
            raise PathEscape(f"holds a percent-encoded path character {stage}")


def _check(root: str, value: str, stage: str) -> None:
    _screen(value, stage)
    if not _inside(root, value):
        raise PathEscape(f"escapes the sandbox root '{root}' {stage}")


def resolve_variables(value: str, variables: dict) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise PathEscape(f"variable '${name}' cannot be resolved")
        replacement = variables[name]
        if not isinstance(replacement, str):
            raise PathEscape(f"variable '${name}' is not a string")
        return replacement

    resolved = _VARIABLE.sub(substitute, value)
    if _LEFTOVER.search(resolved):
        # A variable's value introduced another reference (or a malformed one remains):
        # resolving again could change the meaning, so refuse.
        raise PathEscape("still contains a variable reference after resolution")
    return resolved


def check_root(root: str | None) -> str:
    """The normalised root; PathEscape when there is none, or it cannot be used."""
    if not root:
        raise PathEscape("cannot be checked: context.sandbox_root is not set")
    if not root.startswith("/") or "\x00" in root:
        raise PathEscape("cannot be checked: context.sandbox_root is not an absolute path")
    refusal = root_refusal(root)
    if refusal is not None:
        raise PathEscape(f"cannot be checked: context.sandbox_root {refusal}")
    return normalise(root)


def check_path(value: object, *, root: str | None, variables: dict) -> None:
    """Raise PathEscape unless `value` stays inside `root` before and after resolution, as
    sent and as NFKC reads it."""
    if not isinstance(value, str):
        raise PathEscape(f"is not a string (got {type(value).__name__})")
    root = check_root(root)
    _check(root, value, BEFORE)
    resolved = resolve_variables(value, variables)
    _check(root, resolved, AFTER)
    # The NFKC reading: "．．／" is "../", "＄ｖ" is "$v" (and resolves as such). Skipped
    # where it reads the same, which for ASCII text is always.
    folded = nfkc(value)
    if folded != value:
        _check(root, folded, BEFORE + NFKC_READING)
        try:
            folded_resolved = nfkc(resolve_variables(folded, variables))
        except PathEscape as escape:
            raise PathEscape(f"{escape}{NFKC_READING}") from None
    else:
        folded_resolved = nfkc(resolved)
    if folded_resolved != resolved:
        _check(root, folded_resolved, AFTER + NFKC_READING)


def find_escape(
    args: dict, path_args: tuple[str, ...] | list[str], *, root: str | None, variables: dict
) -> tuple[str, str] | None:
    """The first (argument, reason) that escapes, or None when every path stays inside."""
    for name in path_args:
        if name not in args or args[name] is None:
            continue
        value = args[name]
        values = value if isinstance(value, list) else [value]
        for item in values:
            try:
                check_path(item, root=root, variables=variables)
            except PathEscape as escape:
                return name, str(escape)
    return None


def referenced_variables(args: dict, path_args: tuple[str, ...] | list[str],
                         variables: dict) -> dict:
    """The context variables the path arguments reference (`$name` or `${name}`, as sent or
    as NFKC reads it): what an approval's binding holds of the variables (SPEC §10), since
    they change what those paths mean."""
    names: set[str] = set()
    for name in path_args:
        value = args.get(name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                for reading in {item, nfkc(item)}:
                    for match in _VARIABLE.finditer(reading):
                        names.add(match.group(1) or match.group(2))
    return {n: variables[n] for n in sorted(names) if n in variables}
