"""Sandbox path containment (seed 003): pure string normalisation, no filesystem access.

A path argument is checked before and after `$name` / `${name}` resolution from the
context's variables, so a variable cannot smuggle a path outside the sandbox root. Anything
ambiguous (NUL or control bytes, `~`, percent-encoded dots or slashes, an unresolvable
variable, a missing or relative root) is treated as an escape: the check fails closed.
"""

from __future__ import annotations

import posixpath
import re

_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_LEFTOVER = re.compile(r"\$(?:\{|[A-Za-z_])")
_SLASHES = re.compile(r"/+")
_ENCODED = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)


class PathEscape(Exception):
    """Raised with a human-readable reason when a path is not safely inside the root."""


def normalise(path: str) -> str:
    """Collapse `.`, `..` and duplicate separators; backslashes count as separators."""
    path = _SLASHES.sub("/", path.replace("\\", "/"))
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//"; the slash collapse above already removed it.
    return normal


def _inside(root: str, candidate: str) -> bool:
    # Backslashes are separators before the join too: "\\etc" is absolute, like "/etc".
    joined = normalise(posixpath.join(root, candidate.replace("\\", "/")))
    return joined == root or joined.startswith(root.rstrip("/") + "/")


def _screen(value: str, stage: str) -> None:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise PathEscape(f"contains a control character {stage}")
    if value.startswith("~"):
        raise PathEscape(f"starts with '~' {stage}")
    if _ENCODED.search(value):
        raise PathEscape(f"contains a percent-encoded separator or dot {stage}")


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


def check_path(value: object, *, root: str | None, variables: dict) -> None:
    """Raise PathEscape unless `value` stays inside `root` before and after resolution."""
    if not isinstance(value, str):
        raise PathEscape(f"is not a string (got {type(value).__name__})")
    if not root:
        raise PathEscape("cannot be checked: context.sandbox_root is not set")
    if not root.startswith("/") or "\x00" in root:
        raise PathEscape("cannot be checked: context.sandbox_root is not an absolute path")
    root = normalise(root)
    _screen(value, "before variable resolution")
    if not _inside(root, value):
        raise PathEscape(f"escapes the sandbox root '{root}' before variable resolution")
    resolved = resolve_variables(value, variables)
    _screen(resolved, "after variable resolution")
    if not _inside(root, resolved):
        raise PathEscape(f"escapes the sandbox root '{root}' after variable resolution")


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
