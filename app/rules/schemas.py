"""Wire contract of call rules (SPEC §18).

The shape is checked here (strict types, unknown fields refused, 422 naming them); what a
pattern or a CEL expression means is checked by the core's compile_rule
(app/policy/rules), which the route runs before anything is stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.kit.schemas import Name, Stored, Strict

MAX_PATTERN_CHARS = 1000  # SPEC §18: a pattern at most 1,000 characters
MAX_RULES_PER_SCOPE = 1000  # SPEC §18: 1,000 rules per project, 1,000 global

Pattern = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATTERN_CHARS)]
Patterns = Annotated[list[Pattern], Field(min_length=1, max_length=1000)]
ArgValue = Annotated[str, StringConstraints(max_length=MAX_PATTERN_CHARS)] | int | float | bool
Effect = Literal["deny", "ask", "classify"]
Mode = Literal["enforce", "shadow"]


class WhenIn(Strict):
    """Every given condition must hold (docs/rules.md)."""

    command: Patterns | None = None
    paths: Patterns | None = None
    domains: Patterns | None = None
    args: Annotated[dict[str, ArgValue], Field(max_length=100)] | None = None
    expr: Pattern | None = None


class RuleCapabilityIn(Strict):
    """What a call a classify rule matches is; the fields left out stay the registry's."""

    writes: bool | None = None
    read_only: bool | None = None
    checkpointable: bool | None = None
    unsafe: bool | None = None
    safety_category: Literal["safe", "destructive"] | None = None
    skill_category: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None


class RuleIn(Stored):
    project: Name | None = None
    tools: Annotated[list[Pattern], Field(min_length=1, max_length=100)]
    when: WhenIn | None = None
    effect: Effect
    capability: RuleCapabilityIn | None = None
    message: Annotated[str, StringConstraints(max_length=2000)] | None = None
    mode: Mode = "enforce"


class RuleOut(BaseModel):
    rule_id: str
    project: str | None
    tools: list[str]
    when: dict
    effect: Effect
    capability: dict | None
    message: str | None
    mode: Mode
    version: int
    created_at: datetime
    updated_at: datetime


class RuleList(BaseModel):
    items: list[RuleOut]
