"""The command blocks of the docs, as data: which run, how, and what they must print.

A fenced block whose language is `sh`, `bash`, `console` or `python` runs (in
tests/test_doc_examples.py), unless the line before its fence is
`<!-- doc-test: skip: REASON -->` (an illustration: say why). Blocks of other languages
(`json`, `yaml`, none) are text; a `json` block right after a shell block is what that
block's last command prints. `<!-- doc-test: setup: COMMAND -->` before a shell or console
block runs COMMAND first (what the reader has already: their own policy file, say).

- `sh`/`bash`: the block runs in bash with `set -euo pipefail`; `curl` fails on an HTTP
  error status (`--fail-with-body`). Every command must succeed.
- `console`: lines starting with `$ ` are commands (continued while a quote is open or a
  line ends with a backslash), `# ` lines are comments, the lines in between are what the
  command prints (standard output and error), where `...` stands for any text.
- `python`: the blocks of one page run in order in one namespace, in one process, after
  the page's shell and console blocks.

The pages: README.md, docs/*.md and clients/python/README.md. In every block, the docs'
address (`127.0.0.1:8000`, `localhost:8000`) becomes the served instance's. Blocks run for
real, as the reader would run them: a command that installs or changes the machine needs a
skip marker.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

RUN = ("sh", "bash", "console", "python")
MARKER = re.compile(r"^<!-- doc-test: (skip|setup): (.+?) -->$")
FENCE = re.compile(r"^( *)```([\w-]*)\s*$")  # indented in a list item too


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: str | None = None
    setup: list[str] = field(default_factory=list)
    expect_json: str | None = None  # a json block right after a shell block

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.skip is None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent = len(opened.group(1))
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        block = Block(path, i + 1, opened.group(2),
                      "".join(line[indent:] + "\n" for line in lines[i + 1:end]))
        k = i - 1
        while k >= 0 and (marker := MARKER.match(lines[k].strip())):
            if marker.group(1) == "skip":
                block.skip = marker.group(2)
            else:
                block.setup.insert(0, marker.group(2))
            k -= 1
        if (block.lang == "json" and found and found[-1].lang in ("sh", "bash")
                and found[-1].line + found[-1].text.count("\n") + 1 == i):
            found[-1].expect_json = block.text
        found.append(block)
        i = end + 1
    return found


def served(text: str, url: str) -> str:
    host = url.removeprefix("http://")
    return text.replace("127.0.0.1:8000", host).replace("localhost:8000", host)


# --- console blocks ---------------------------------------------------------------------------

def _complete(command: str) -> bool:
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:  # a quote still open
        return False
    return True


def console_steps(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while not _complete(command) and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            steps.append((command, []))
        elif line.startswith("# "):
            pass  # a comment
        elif steps:
            steps[-1][1].append(line)
        i += 1
    return [(command, "\n".join(out).strip("\n")) for command, out in steps]


def matches(expected: str, actual: str) -> bool:
    """`...` in `expected` stands for any text (lines compared without trailing blanks)."""
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())

    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(actual), flags=re.DOTALL) is not None


# --- json expectations ------------------------------------------------------------------------

def last_json(output: str) -> object:
    """The last JSON value of `output` (curl prints bodies back to back, without newlines)."""
    decoder = json.JSONDecoder()
    value, i, text = None, 0, output.strip()
    while i < len(text):
        value, i = decoder.raw_decode(text, i)
        while i < len(text) and text[i].isspace():
            i += 1
    return value


def json_matches(expected: object, actual: object) -> bool:
    """A string "..." matches anything; "abc..." any string starting with "abc"."""
    if isinstance(expected, str) and expected.endswith("..."):
        return expected == "..." or (isinstance(actual, str)
                                     and actual.startswith(expected[:-3]))
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and expected.keys() == actual.keys()
                and all(json_matches(v, actual[k]) for k, v in expected.items()))
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(json_matches(e, a) for e, a in zip(expected, actual, strict=True)))
    return expected == actual and type(expected) is type(actual)
