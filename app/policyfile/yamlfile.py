"""Policy files as YAML that remembers where everything is (used by app/policyfile/document.py).

Read with PyYAML's composer, which keeps the line of every node, and turned into plain
values here with the YAML 1.2 core schema: only true/false are booleans (`yes`, `no`, `on`,
`off` stay strings, which the service's strict models then refuse instead of silently
reading a boolean), duplicate keys are errors, dates stay strings, merge keys are refused.
Written with a dumper that quotes every string this reader would take for something else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

MAX_NODES = 100_000  # aliases can expand a small file enormously

Path = tuple[str | int, ...]


# --- problems -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    line: int | None
    where: str
    message: str

    def render(self, source: str) -> str:
        place = f"{source}:{self.line}" if self.line else source
        where = f" {self.where}:" if self.where else ""
        return f"{place}:{where} {self.message}"


class PolicyFileError(Exception):
    """The file is rejected whole; `problems` says why, with lines."""

    def __init__(self, problems: Iterable[Problem], source: str = "<policy>") -> None:
        self.problems = sorted(problems, key=lambda p: (p.line or 0, p.where))
        self.source = source
        super().__init__("\n".join(p.render(source) for p in self.problems))


def dotted(path: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in path)


# --- YAML with lines ----------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """Composes nodes with YAML 1.2 core-schema tags (values are built by `_Reader`)."""


_Loader.yaml_implicit_resolvers = {}
_CORE = [
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
              r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", list("-+.0123456789")),
]
for _tag, _pattern, _first in _CORE:
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)

_TAG = "tag:yaml.org,2002:"


class _Reader:
    def __init__(self) -> None:
        self.lines: dict[Path, int] = {}
        self.problems: list[Problem] = []
        self.nodes = 0

    def value(self, node: yaml.Node, path: Path, active: frozenset[int]) -> Any:
        self.nodes += 1
        line = node.start_mark.line + 1
        if self.nodes > MAX_NODES:
            raise PolicyFileError([Problem(line, dotted(path), "the file expands to more "
                                           f"than {MAX_NODES} values (aliases?)")])
        if id(node) in active:
            self.problems.append(Problem(line, dotted(path), "recursive alias"))
            return None
        inner = active | {id(node)}
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    self.problems.append(Problem(key_line, dotted(path), "a key must be a string"))
                    continue
                if key_node.value == "<<" and key_node.style is None:
                    self.problems.append(Problem(key_line, dotted(path),
                                                 "merge keys (<<) are not supported"))
                    continue
                key = key_node.value  # keys are names: always their text (`123:` is "123")
                if key in out:
                    first = self.lines[(*path, key)]
                    self.problems.append(Problem(key_line, dotted((*path, key)),
                                                 f"duplicate key (first at line {first})"))
                    continue
                self.lines[(*path, key)] = key_line
                out[key] = self.value(value_node, (*path, key), inner)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.lines[(*path, index)] = item.start_mark.line + 1
                items.append(self.value(item, (*path, index), inner))
            return items
        return self.scalar(node, path, line)

    def scalar(self, node: yaml.Node, path: Path, line: int) -> Any:
        tag, text = node.tag, node.value
        try:
            if tag == _TAG + "str":
                return text
            if tag == _TAG + "null":
                return None
            if tag == _TAG + "bool":
                return text.lower() == "true"
            if tag == _TAG + "int":
                base = {"0o": 8, "0x": 16}.get(text[:2], 10)
                return int(text[2:] if base != 10 else text, base)
            if tag == _TAG + "float":
                if text.lower().lstrip("+-") in (".inf", ".nan"):
                    number = math.inf if "inf" in text.lower() else math.nan
                    return -number if text.startswith("-") else number
                return float(text)
        except ValueError:
            pass
        self.problems.append(Problem(line, dotted(path), f"cannot read {text!r} as {tag}"))
        return None


def read_yaml(text: str, source: str = "<policy>") -> tuple[Any, dict[Path, int]]:
    """Plain data (dict/list/str/int/float/bool/None) and the line of every key and item."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        raise PolicyFileError([Problem(line, "", f"YAML syntax error: {what}")], source) from None
    except yaml.YAMLError as exc:
        raise PolicyFileError([Problem(None, "", f"YAML error: {exc}")], source) from None
    if root is None:
        return None, {}
    reader = _Reader()
    try:
        data = reader.value(root, (), frozenset())
    except PolicyFileError as exc:
        raise PolicyFileError(exc.problems, source) from None
    if reader.problems:
        raise PolicyFileError(reader.problems, source)
    return data, reader.lines


class _Dumper(yaml.SafeDumper):
    """Quotes every string our YAML 1.2 loader would read as something else (e.g. "0o17"),
    on top of the YAML 1.1 ones PyYAML already quotes (e.g. "yes")."""


for _tag, _pattern, _first in _CORE:
    _Dumper.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)


def dump_yaml(doc: dict[str, Any], header: str = "") -> str:
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)
    return header + body
