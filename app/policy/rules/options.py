"""Reading a wrapper's options with its table (wrappers.py): where its command starts."""

from __future__ import annotations

from app.policy.rules.words import UNKNOWN, Word
from app.policy.rules.wrappers import (
    URL_COMMANDS,
    URL_HIDDEN_OPTIONS,
    URL_VALUE_OPTIONS,
    URL_VIA_OPTIONS,
    Wrapper,
)

SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def has_c(options: list[Word]) -> bool:
    return any(o.text.startswith("-") and not o.text.startswith("--") and "c" in o.text
               for o in options)


def script_operand(rest: list[Word]) -> int | None:
    """Index of a shell's first operand (the -c command or the script file), if any;
    None when the shell reads its script from its input (no operand, or -s)."""
    i = 0
    while i < len(rest):
        t = rest[i].text
        if t.startswith("-") and not t.startswith("--") and "s" in t and "c" not in t:
            return None
        if t == "--":
            return i + 1 if i + 1 < len(rest) else None
        if not t.startswith(("-", "+")) or t in ("-", "+"):
            return i
        i += 2 if t in SHELL_VALUE_OPTIONS else 1
    return None


def skip_options(w: Wrapper, rest: list[Word]) -> tuple[int | None, bool, list[Word]]:
    """Index of the wrapped command's first word (None when the options say there is no
    command: `command -v x`), whether it is only a guess (an option the table does not
    know), and the option values that are command lines themselves (`env -S "..."`)."""
    lines: list[Word] = []
    i = 0
    while i < len(rest):
        t = rest[i].text
        if w.assignments and "=" in t and t.split("=", 1)[0].isidentifier():
            i += 1
            continue
        if not t.startswith("-") or (t == "-" and "-" not in w.flags):
            if w.how == "options":  # `su - root -c "..."`: options after operands too
                i += 1
                continue
            return i, False, lines
        if t == "--":
            return i + 1, False, lines
        if t in w.no_command:
            return None, False, lines
        key = t.split("=", 1)[0] if t.startswith("--") else t
        if key in w.line_values:
            if "=" in t:
                lines.append(Word(t.split("=", 1)[1]))
            elif i + 1 < len(rest):
                lines.append(rest[i + 1])
            i += 1 if "=" in t else 2
            continue
        if key in w.values:
            i += 1 if "=" in t else 2
            continue
        if t in w.flags or (w.numeric_flags and t[1:].isdigit()):
            i += 1
            continue
        if not t.startswith("--") and len(t) > 2:
            letters = [f"-{c}" for c in t[1:]]
            if letters[0] in w.line_values:  # env -S'rm -rf x': the line is attached
                lines.append(Word(t[2:]) if rest[i].literal else rest[i])
                i += 1
                continue
            if letters[0] in w.values:  # -uroot
                i += 1
                continue
            if all(x in w.flags for x in letters):
                i += 1
                continue
            if all(x in w.flags for x in letters[:-1]) and letters[-1] in w.values:
                i += 2
                continue
            if all(x in w.flags for x in letters[:-1]) and letters[-1] in w.line_values:
                if i + 1 < len(rest):  # `script -qc "..."`
                    lines.append(rest[i + 1])
                i += 2
                continue
        if w.how == "options":  # only the line options matter: skip what it is not
            i += 1
            continue
        return i, True, lines
    return i, False, lines


def url_operands(name: str, rest: list[Word]) -> list[Word]:
    """The words of a URL command `name` (`curl`, `wget`) that are URLs: its operands, the
    values of `--url` and of a proxy option, read with its table of options that take a
    value; an option that takes the request elsewhere unseen (`curl -K cfg`) adds UNKNOWN."""
    via = URL_VALUE_OPTIONS | URL_VIA_OPTIONS.get(name, frozenset())
    hidden = URL_HIDDEN_OPTIONS.get(name, frozenset())
    values = URL_COMMANDS[name] | via | hidden
    urls: list[Word] = []
    i = 0
    while i < len(rest):
        t = rest[i].text
        if t == "--":
            urls.extend(rest[i + 1:])
            break
        if not t.startswith("-") or t == "-":
            urls.append(rest[i])
            i += 1
            continue
        if t.startswith("--"):
            option, attached = t.split("=", 1) if "=" in t else (t, None)
        else:  # a cluster: -sSL, -o FILE, -sSxHOST (the first letter taking a value)
            k = next((k for k in range(1, len(t)) if f"-{t[k]}" in values), len(t) - 1)
            option, attached = f"-{t[k]}", t[k + 1:] or None
        if option in hidden:
            urls.append(Word(UNKNOWN))
        if option not in values:
            i += 1
            continue
        value = Word(attached) if attached is not None else rest[i + 1] if i + 1 < len(
            rest) else None
        if option in via and value is not None:
            urls.append(value)
        i += 1 if attached is not None else 2
    return urls
