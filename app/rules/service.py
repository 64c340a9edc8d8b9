"""Call rules as decisions read them: compiled when they change, never per decision.

`RuleBook.load(session)` is the registry cache's rules loader (main.py wires it): on every
registry reload (the version is bumped by each rule change, on whichever replica made it)
it reads the live rules and builds one immutable RuleSet (app/policy/rules), which the
decision reads from memory as `registry.rules`. A rule is compiled once per (id, version):
a reload for an unrelated registry change recompiles nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.edge.errors import InvalidInput
from app.policy.rules import CompiledRule, RuleError, RuleSet, build_ruleset, compile_rule
from app.rules import repository as rules_repo
from app.rules.tables import Rule

log = logging.getLogger("toolgate.rules")


def invalid(exc: RuleError, *, prefix: str = "") -> InvalidInput:
    """A rule that does not compile: 422 naming the rule's field (SPEC §18)."""
    field = f"{prefix}{exc.field}" if exc.field else prefix.rstrip(".") or "body"
    return InvalidInput(f"invalid rule: {field}: {exc.message}", code="invalid_rule",
                        fields=[{"field": field, "message": exc.message,
                                 "type": "invalid_rule"}])


def compile_body(rule_id: str, body: dict[str, Any], *, version: int = 1,
                 prefix: str = "") -> CompiledRule:
    """compile_rule, its RuleError turned into the API's 422."""
    try:
        return compile_rule(rule_id, body, version=version)
    except RuleError as exc:
        raise invalid(exc, prefix=prefix) from None


def compile_set(bodies: dict[str, dict[str, Any]], *, prefix: str = "") -> RuleSet:
    """A rule set from bodies by rule id (replay candidates, POST /v1/test): 422 naming
    `<prefix><rule_id>.<field>` for the first that does not compile."""
    return build_ruleset(compile_body(rule_id, body, prefix=f"{prefix}{rule_id}.")
                         for rule_id, body in sorted(bodies.items()))


class RuleBook:
    """The compiled rules of this process, by (id, version)."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, int], CompiledRule] = {}

    async def load(self, session: AsyncSession) -> RuleSet:
        rows = await rules_repo.load_rules(session)
        compiled: dict[tuple[str, int], CompiledRule] = {}
        for row in rows:
            key = (row.rule_id, row.version)
            rule = self._compiled.get(key)
            if rule is None:
                rule = self._compile_stored(row)
            if rule is not None:
                compiled[key] = rule
        self._compiled = compiled  # rules deleted or replaced are dropped
        return build_ruleset(compiled.values())

    @staticmethod
    def _compile_stored(row: Rule) -> CompiledRule | None:
        # Keys in one order on both databases (JSONB reorders an object's keys): a rule's
        # `matched` (the first of its `args` that holds, say) is then the same everywhere.
        body = orjson.loads(orjson.dumps(row.body, option=orjson.OPT_SORT_KEYS))
        try:
            return compile_rule(row.rule_id, body, version=row.version)
        except RuleError as exc:
            # Stored rules compiled when they were stored; one that no longer does (a
            # release that reads rules more strictly) is logged loudly. Decisions fail
            # closed: a deny or ask rule left out would let through what it stopped, so it
            # stands in as a deny of every call of its tools until it is stored again; a
            # classify rule left out only takes back a loosening.
            log.error("stored rule %r version %d no longer compiles (%s: %s); until it is "
                      "stored again, %s", row.rule_id, row.version, exc.field, exc.message,
                      "it denies every call of its tools"
                      if body.get("effect") in ("deny", "ask") else "it is not evaluated")
            if body.get("effect") not in ("deny", "ask"):
                return None
            return _stand_in(row, body, f"{exc.field}: {exc.message}")


def _stand_in(row: Rule, body: dict[str, Any], why: str) -> CompiledRule:
    """The deny that stands in for a stored deny or ask rule that no longer compiles: its
    own tools (every tool when those do not compile either), no condition."""
    message = (f"rule {row.rule_id!r} no longer compiles ({why}); every call of its tools "
               "is denied until an admin stores it again")
    project = body.get("project") if isinstance(body.get("project"), str) else None
    mode = body.get("mode") if body.get("mode") in ("enforce", "shadow") else "enforce"
    for tools in (body.get("tools"), ["*"]):
        try:
            return compile_rule(row.rule_id, {"project": project, "tools": tools,
                                              "effect": "deny", "message": message,
                                              "mode": mode}, version=row.version)
        except RuleError:
            continue
    raise AssertionError("a deny of every tool always compiles")
