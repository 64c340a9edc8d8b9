"""Could one path match two globs? (deny/ask rules on `cat .en*`, `cat $DIR/.env`).

Both sides become token lists: a literal character, `?` (one character but `/`; a `[...]`
class is read as `?`, which only widens), `*` (any run without `/`) and `**` or an unknown
part (any run at all). Two lists intersect when some string matches both: a search over
pairs of positions, each list an automaton whose stars loop on themselves.
As in the shell, a glob at the start of a word's path component does not match a leading
dot (`*` is not `.env`, `src/*.py` is not `src/.env.py`): a NODOT mark before it.
"""

from __future__ import annotations

ONE, STAR, ANY, NODOT = "?", "*", "**", "nodot"
UNKNOWN = "\x01"
ANYWHERE = "\x02"

Token = tuple[str, str]  # (kind, literal character) with kind "L", ONE, STAR or ANY


def glob_tokens(text: str) -> tuple[Token, ...]:
    """A shell word as it may expand: `*`, `?`, `[...]` globs, UNKNOWN for any run."""
    out: list[Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "*?[" and (i == 0 or text[i - 1] == "/"):
            out.append((NODOT, ""))
        if c == UNKNOWN:
            out.append((ANY, ""))
        elif c == "*":
            out.append((STAR, ""))
        elif c == "?":
            out.append((ONE, ""))
        elif c == "[" and "]" in text[i + 2:]:
            out.append((ONE, ""))
            i = text.index("]", i + 2)
        else:
            out.append(("L", c))
        i += 1
    return tuple(out)


def pattern_tokens(prefix: str, body: str) -> tuple[tuple[Token, ...], ...]:
    """A gitignore pattern below `prefix` (ANYWHERE: at any depth), and the paths below
    what it matches."""
    out: list[Token] = []
    if prefix == ANYWHERE:
        out.append((ANY, ""))
        body = body[3:] if body.startswith("**/") else body
        body = "/" + body
    else:
        out.extend(("L", c) for c in prefix)
    i = 0
    while i < len(body):
        c = body[i]
        if body.startswith("**", i):
            out.append((ANY, ""))
            i += 2
            continue
        if c == "\\" and i + 1 < len(body):
            out.append(("L", body[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append((STAR, ""))
        elif c == "?":
            out.append((ONE, ""))
        elif c == "[" and "]" in body[i + 2:]:
            out.append((ONE, ""))
            i = body.index("]", i + 2)
        else:
            out.append(("L", c))
        i += 1
    if out and out[-1] == ("L", "/"):
        out.pop()
    exact = tuple(out)
    return exact, exact + (("L", "/"), (ANY, ""))


def _classes_meet(a: Token, b: Token) -> bool:
    (ka, ca), (kb, cb) = a, b
    if ka == "L" and kb == "L":
        return ca == cb
    if ka == "L":
        return ca != "/" or kb == ANY
    if kb == "L":
        return cb != "/" or ka == ANY
    return True


def intersects(word: tuple[Token, ...], alternatives: tuple[tuple[Token, ...], ...]) -> bool:
    return any(_intersects(word, alt) for alt in alternatives)


def _intersects(a: tuple[Token, ...], b: tuple[Token, ...]) -> bool:
    """`a` may hold NODOT marks (a word's); `b` none (a pattern's)."""
    seen: set[tuple[int, int, bool]] = set()
    todo = [(0, 0, False)]
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j, nodot = state
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i][0] == NODOT:
            todo.append((i + 1, j, True))
            continue
        loop_a = i < len(a) and a[i][0] in (STAR, ANY)
        loop_b = j < len(b) and b[j][0] in (STAR, ANY)
        if loop_a:
            todo.append((i + 1, j, nodot))
        if loop_b:
            todo.append((i, j + 1, nodot))
        if i < len(a) and j < len(b) and _classes_meet(a[i], b[j]) \
                and not (nodot and ("L", ".") in (a[i], b[j])):
            todo.append((i if loop_a else i + 1, j if loop_b else j + 1, False))
    return False
