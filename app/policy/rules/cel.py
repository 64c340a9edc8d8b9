"""`expr` conditions in CEL (SPEC §18 "CEL"), with the CEL project's Python runtime
(`cel-expr-python`, a binding of cel-cpp): parsed and type-checked when a rule is compiled,
evaluated per call.

Variables: `tool` (`name`, `args`, `capability`), `plan` (`id`, `project`, `action`) and
`context`, each a map from string to dynamic values (JSON). An expression whose type is
known and is not bool is refused when compiled; one that yields something else than a bool,
or fails (a missing key, a type error), is an error: a match for deny and ask rules, no
match for classify rules. `context` and `tool.args` are what the agent sent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

VARIABLES = ("tool", "plan", "context")
_lock = threading.Lock()
_env: Any = None


def _environment() -> Any:
    global _env
    with _lock:
        if _env is None:
            dyn_map = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
            _env = cel.NewEnv(variables={name: dyn_map for name in VARIABLES})
        return _env


@dataclass(frozen=True, slots=True)
class Expression:
    source: str
    program: Any

    def evaluate(self, data: dict[str, Any]) -> bool | None:
        """True or False; None when evaluation fails or is not a bool."""
        try:
            value = self.program.eval(data=data)
            if value.type() != cel.Type.BOOL:
                return None
            result = value.value()
        except Exception:  # noqa: BLE001 - any failure of the runtime is "an error"
            return None
        return result if isinstance(result, bool) else None


def compile_expression(source: str) -> Expression:
    """ValueError naming what is wrong: a syntax error, an undeclared name, a type error,
    or a result that cannot be a bool."""
    try:
        program = _environment().compile(source)
    except Exception as e:  # noqa: BLE001 - cel-cpp reports every compile error this way
        text = str(e).replace("INVALID_ARGUMENT: ", "").strip()
        raise ValueError(f"CEL does not compile: {text}") from None
    kind = program.return_type()
    if kind != cel.Type.BOOL and kind != cel.Type.DYN:
        raise ValueError(f"CEL must return a bool, not {kind.name()}")
    return Expression(source, program)
