"""Plain values of call rules (SPEC §18): the compiled rule, the call it is evaluated on,
and what evaluation says. Nothing here parses or matches; see the sibling modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EFFECTS = ("deny", "ask", "classify")
MODES = ("enforce", "shadow")
# What a rule's `matched` says when the command line could not be seen through.
CANNOT_BE_ANALYSED = "cannot be analysed"


class RuleError(ValueError):
    """A rule that does not compile. `field` is the dotted path of the bad field inside the
    rule body, list indexes as numbers (`when.command.1`, `tools.0`, `capability.writes`),
    the same spelling as the API's 422 `field`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """One rule that matched a call, and what in the call matched it."""

    rule_id: str
    version: int
    effect: str
    mode: str
    matched: str
    message: str | None = None

    def as_detail(self) -> dict[str, Any]:
        """`deny.details.rule` (and the approval's)."""
        return {"id": self.rule_id, "version": self.version, "matched": self.matched}

    def as_record(self) -> dict[str, Any]:
        """One entry of the record's `detail.rules`."""
        return {"id": self.rule_id, "version": self.version, "effect": self.effect,
                "mode": self.mode, "matched": self.matched}


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """What the enforce-mode rules decide, and every rule that matched (shadow ones too).

    `deny`, `ask` and `classify` are each the first enforce-mode match of that effect by
    rule_id; the pipeline applies them in that order (a deny decides; an ask makes check 6
    apply; a classify's `capability` overlays the effective tool's)."""

    deny: RuleMatch | None = None
    ask: RuleMatch | None = None
    classify: RuleMatch | None = None
    capability: Mapping[str, Any] | None = None
    matches: tuple[RuleMatch, ...] = ()


NO_OUTCOME = RuleOutcome()


@dataclass(frozen=True, slots=True)
class RuleCall:
    """The call a rule set is evaluated on: plain values taken from the effective tool and
    the request by the pipeline. `path_args` and `url_args` are argument NAMES (values are
    read from `args`: a string, or a list of strings)."""

    tool_name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    shell_arg: str | None = None
    path_args: tuple[str, ...] = ()
    url_args: tuple[str, ...] = ()
    sandbox_root: str | None = None
    home: str | None = None
    capability: Mapping[str, Any] = field(default_factory=dict)
    plan: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
