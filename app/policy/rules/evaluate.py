"""Evaluating a rule set on a call (SPEC §18 "Effects"): a pure function of the compiled
rules and the call.

Every condition a rule gives must hold. Deny and ask rules lean to matching where the call
cannot be read (fail closed); classify rules match only what is certain, and only when
every part of the call matches: every simple command, every path, every host. The outcome
names the first enforce-mode rule of each effect by rule_id, and every rule that matched,
shadow ones included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.policy.rules.compile import CompiledRule
from app.policy.rules.domains import UNREADABLE, matches_host, url_host
from app.policy.rules.model import (
    CANNOT_BE_ANALYSED,
    NO_OUTCOME,
    RuleCall,
    RuleMatch,
    RuleOutcome,
)
from app.policy.rules.pathmatch import (
    glob_may_match,
    matches_path,
    may_match,
    readings,
    resolve,
)
from app.policy.rules.shell import Analysis, analyse

MAX_CACHED_TOOLS = 4096
MAX_CACHED_OUTCOMES = 4096


class RuleSet:
    """Compiled rules, global and of every project, sorted by rule_id; immutable. The
    rules that may apply to a (project, tool name) are found once and remembered, and so is
    the outcome for a shell call when none of them reads `args` or `expr` (it is then a
    function of the command line, the paths, the URLs, the root and home only)."""

    __slots__ = ("rules", "empty", "_candidates", "_outcomes")

    def __init__(self, rules: Iterable[CompiledRule]) -> None:
        self.rules: tuple[CompiledRule, ...] = tuple(sorted(rules, key=lambda r: r.rule_id))
        self.empty = not self.rules
        self._candidates: dict[tuple[str | None, str], tuple[CompiledRule, ...]] = {}
        self._outcomes: dict[tuple[Any, ...], RuleOutcome] = {}

    def candidates(self, project: str | None, tool: str) -> tuple[CompiledRule, ...]:
        key = (project, tool)
        found = self._candidates.get(key)
        if found is None:
            found = tuple(r for r in self.rules
                          if (r.project is None or r.project == project)
                          and any(p.matches(tool) for p in r.tools))
            if len(self._candidates) >= MAX_CACHED_TOOLS:
                self._candidates.clear()
            self._candidates[key] = found
        return found


def build_ruleset(rules: Iterable[CompiledRule]) -> RuleSet:
    return RuleSet(rules)


EMPTY_RULESET = RuleSet(())


def _values(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _relative(text: str) -> bool:
    return not text.startswith(("/", "~", "$HOME", "${HOME}", "\x01"))


class _Facts:
    """What the rules read of a call, each computed at most once."""

    def __init__(self, call: RuleCall) -> None:
        self.call = call
        self._analysis: Analysis | None | bool = False
        self._hosts: list[str] | None = None
        self._paths: list[tuple[str, bool]] | None = None
        self._resolved: list[str | None] | None = None
        self._readings: list[tuple[str, ...]] | None = None
        self._cel: dict[str, Any] | None = None

    @property
    def analysis(self) -> Analysis | None:
        if self._analysis is False:
            call = self.call
            if call.shell_arg is None:
                self._analysis = None
            else:
                line = call.args.get(call.shell_arg)
                self._analysis = (analyse(line) if isinstance(line, str)
                                  else Analysis(unanalysable="the command is not a string"))
        return self._analysis  # type: ignore[return-value]

    def paths(self) -> list[tuple[str, bool]]:
        """(text, dynamic) of every path of the call."""
        if self._paths is not None:
            return self._paths
        out = [(v, False) for name in self.call.path_args
               for v in _values(self.call.args.get(name))]
        analysis = self.analysis
        if analysis is not None:
            out.extend(analysis.paths)
            # After `cd sub`, a relative path is read against sub as well.
            for cwd, cwd_dynamic in analysis.cwds:
                out.extend((f"{cwd}/{text}", dynamic or cwd_dynamic)
                           for text, dynamic in analysis.paths if _relative(text))
        self._paths = out
        return out

    def resolved(self) -> list[str | None]:
        """Each path resolved against the root and home (None: cannot be told)."""
        if self._resolved is None:
            call = self.call
            self._resolved = [None if dynamic else resolve(text, call.sandbox_root, call.home)
                              for text, dynamic in self.paths()]
        return self._resolved

    def readings(self) -> list[tuple[str, ...]]:
        if self._readings is None:
            call = self.call
            self._readings = [readings(p, call.sandbox_root, call.home) if p else ()
                              for p in self.resolved()]
        return self._readings

    def hosts(self) -> list[str]:
        if self._hosts is None:
            # A URL argument without a scheme (`github.com/x`) names a host all the same.
            urls = [v if "://" in v[:24] else "http://" + v
                    for name in self.call.url_args for v in _values(self.call.args.get(name))]
            analysis = self.analysis
            if analysis is not None:
                urls.extend(analysis.urls)
            self._hosts = [url_host(u) for u in urls]
        return self._hosts

    def cel_data(self) -> dict[str, Any]:
        if self._cel is None:
            call = self.call
            self._cel = {
                "tool": {"name": call.tool_name, "args": dict(call.args),
                         "capability": dict(call.capability)},
                "plan": {"id": call.plan.get("id"), "project": call.plan.get("project"),
                         "action": call.plan.get("action")},
                "context": dict(call.context),
            }
        return self._cel


def _command(rule: CompiledRule, facts: _Facts, lenient: bool) -> str | None:
    analysis = facts.analysis
    if analysis is None:
        return None
    if analysis.unanalysable:
        return CANNOT_BE_ANALYSED if lenient else None
    patterns = rule.command
    assert patterns is not None
    if lenient:
        for cmd in analysis.commands:
            if patterns.matches(cmd.words, fold=True):
                return " ".join(cmd.words)
        return None
    if analysis.opaque or (analysis.writes and not (rule.capability or {}).get("writes")):
        return None
    units = [c for c in analysis.commands if not c.transparent]
    if not units or any(c.tentative for c in units):
        return None
    if all(patterns.matches(c.words) for c in units):
        return str(facts.call.args.get(facts.call.shell_arg or "", "")).strip()
    return None


def _paths(rule: CompiledRule, facts: _Facts, lenient: bool) -> str | None:
    call, pathset = facts.call, rule.paths
    assert pathset is not None
    patterns = pathset.patterns
    analysis = facts.analysis
    if analysis is not None and analysis.unanalysable:
        return CANNOT_BE_ANALYSED if lenient else None
    root, home = call.sandbox_root, call.home
    paths = facts.paths()
    first = ""  # classify: every path (of none, vacuously) matches
    for (text, dynamic), resolved, reads in zip(paths, facts.resolved(), facts.readings(),
                                                strict=True):
        if dynamic:
            if not lenient:
                return None
            if glob_may_match(patterns, text, root=root, home=home):
                return text.replace("\x01", "?")
            continue
        if resolved is None:
            if lenient:
                return text
            return None
        hit = may_match(pathset, reads, root=root, home=home, lenient=lenient) and matches_path(
            patterns, resolved, root=root, home=home, lenient=lenient)
        if lenient and hit:
            return resolved
        if not lenient:
            if not hit:
                return None
            first = first or resolved
    return None if lenient else first


def _domains(rule: CompiledRule, facts: _Facts, lenient: bool) -> str | None:
    analysis = facts.analysis
    if analysis is not None and analysis.unanalysable:
        return CANNOT_BE_ANALYSED if lenient else None
    hosts = facts.hosts()
    patterns = rule.domains or ()
    for host in hosts:
        hit = matches_host(patterns, host, lenient=lenient)
        if lenient and hit:
            return host if host != UNREADABLE else "an unreadable host"
        if not lenient and not hit:
            return None
    return None if lenient else (hosts[0] if hosts else "")


def _match(rule: CompiledRule, facts: _Facts) -> str | None:
    """What matched, or None when the rule does not match."""
    lenient = rule.effect != "classify"
    found: list[str] = []
    if rule.paths is not None:
        if (m := _paths(rule, facts, lenient)) is None:
            return None
        found.append(m)
    if rule.domains is not None:
        if (m := _domains(rule, facts, lenient)) is None:
            return None
        found.append(m)
    if rule.command is not None:
        if (m := _command(rule, facts, lenient)) is None:
            return None
        found.append(m)
    if rule.args is not None:
        if not all(a.holds(facts.call.args) for a in rule.args):
            return None
        found.append("args." + rule.args[0].name)
    if rule.expr is not None:
        result = rule.expr.evaluate(facts.cel_data())
        if result is False or (result is None and not lenient):
            return None
        found.append("expr" if result else "expr (error)")
    if CANNOT_BE_ANALYSED in found:
        return CANNOT_BE_ANALYSED
    if not lenient and rule.command is not None:
        return found[len(found) - 1 - (rule.expr is not None) - (rule.args is not None)]
    return next((m for m in found if m), facts.call.tool_name)


def _memo_key(call: RuleCall, project: str | None,
              rules: tuple[CompiledRule, ...]) -> tuple[Any, ...] | None:
    if call.shell_arg is None or any(r.args is not None or r.expr is not None for r in rules):
        return None
    line = call.args.get(call.shell_arg)
    if not isinstance(line, str):
        return None
    return (project, call.tool_name, line, call.sandbox_root, call.home,
            tuple(tuple(_values(call.args.get(n))) for n in call.path_args),
            tuple(tuple(_values(call.args.get(n))) for n in call.url_args))


def evaluate_rules(ruleset: RuleSet, call: RuleCall) -> RuleOutcome:
    if ruleset.empty:
        return NO_OUTCOME
    project = call.plan.get("project") if call.plan else None
    rules = ruleset.candidates(project, call.tool_name)
    if not rules:
        return NO_OUTCOME
    key = _memo_key(call, project, rules)
    if key is not None:
        known = ruleset._outcomes.get(key)
        if known is None:
            known = _evaluate(rules, call)
            if len(ruleset._outcomes) >= MAX_CACHED_OUTCOMES:
                ruleset._outcomes.clear()
            ruleset._outcomes[key] = known
        return known
    return _evaluate(rules, call)


def _evaluate(rules: tuple[CompiledRule, ...], call: RuleCall) -> RuleOutcome:
    facts = _Facts(call)
    matches: list[RuleMatch] = []
    first: dict[str, RuleMatch] = {}
    capability = None
    for rule in rules:
        matched = _match(rule, facts)
        if matched is None:
            continue
        m = RuleMatch(rule.rule_id, rule.version, rule.effect, rule.mode, matched,
                      rule.message)
        matches.append(m)
        if rule.mode == "enforce" and rule.effect not in first:
            first[rule.effect] = m
            if rule.effect == "classify":
                capability = rule.capability
    if not matches:
        return NO_OUTCOME
    return RuleOutcome(first.get("deny"), first.get("ask"), first.get("classify"),
                       capability, tuple(matches))
