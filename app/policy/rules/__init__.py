"""Call rules (SPEC §18): decide on what a call does, not only on what the tool is.

Pure: imports neither FastAPI nor SQLAlchemy. Compile once (when rules change), evaluate
per call, as the registry cache is read:

    rule = compile_rule("no-secrets", body, version=3)      # RuleError(field, message)
    ruleset = build_ruleset([rule, ...])                     # immutable, sorted by rule_id
    outcome = evaluate_rules(ruleset, RuleCall(...))         # RuleOutcome

The parts:
- model.py      the plain values: RuleCall, RuleMatch, RuleOutcome, RuleError
- compile.py    a rule body checked and compiled (patterns, globs, CEL)
- evaluate.py   the rule set and its evaluation (deny, ask, classify; shadow recorded)
- shell.py      a command line analysed (cached by its text); parse.py: tree-sitter-bash
                with a cost budget; walker.py: the one walker over its tree; collect.py:
                the paths, URLs and directories of the words; options.py: reading a
                wrapper's options; variables.py: variables the line sets itself
- wrappers.py   the table of commands that run commands (sudo, env, xargs, find -exec, ...)
- words.py      a shell word's value after quotes and escapes
- patterns.py   tool-name, command and argument patterns
- pathmatch.py  gitignore-style path patterns and lexical resolution; globs.py: glob overlap
- domains.py    hosts of URLs, IDNA-normalised, and domain patterns
- cel.py        `expr` conditions in CEL
- claude_import.py  Claude Code's permission rules turned into rule bodies
"""

from app.policy.rules.compile import (
    CAPABILITY_FIELDS,
    MAX_PATTERN_CHARS,
    RULE_FIELDS,
    CompiledRule,
    compile_rule,
)
from app.policy.rules.evaluate import EMPTY_RULESET, RuleSet, build_ruleset, evaluate_rules
from app.policy.rules.model import (
    CANNOT_BE_ANALYSED,
    NO_OUTCOME,
    RuleCall,
    RuleError,
    RuleMatch,
    RuleOutcome,
)

__all__ = [
    "CANNOT_BE_ANALYSED",
    "CAPABILITY_FIELDS",
    "EMPTY_RULESET",
    "MAX_PATTERN_CHARS",
    "NO_OUTCOME",
    "RULE_FIELDS",
    "CompiledRule",
    "RuleCall",
    "RuleError",
    "RuleMatch",
    "RuleOutcome",
    "RuleSet",
    "build_ruleset",
    "compile_rule",
    "evaluate_rules",
]
