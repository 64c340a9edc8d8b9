"""What a command hook (`toolgate hook <agent>`, app/cli/hook.py) holds before it lets a
call run (SPEC §20): the service's answer read strictly, as plain data, no I/O.

An agent runs a call whose hook fails in any way other than its blocking exit code, so the
command exits 0 only on a well-formed answer: strict JSON (no duplicate key at any depth,
app/edge/jsonkeys.py), exactly the fields of the answer expected for the event that was
sent, with exactly the expected values. Everything else, `{}` for a PreToolUse, an unknown
decision, `"allow "`, an extra field (Claude Code's `updatedInput` would change what runs),
a deny with a second `permissionDecision`, is a block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from app.edge.jsonkeys import first_duplicate
from app.hooks.claude import EVENTS, POST, POST_FAILURE, PRE

MAX_REASON = 2000
_PRE_FIELDS = {"hookEventName", "permissionDecision", "permissionDecisionReason"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """`allow` / `ask` (a PreToolUse's well-formed answer), `done` (a PostToolUse's `{}`),
    or `blocked`, with the reason the agent (and its model) is shown."""

    outcome: Literal["allow", "ask", "done", "blocked"]
    reason: str


def event_of(body: Any) -> str | None:
    """The Claude Code event of the body sent to the service, if it is one of the three."""
    event = body.get("hook_event_name") if isinstance(body, dict) else None
    return event if event in EVENTS else None


def strict(raw: bytes) -> Any:
    """`raw` parsed (orjson: RFC 8259, no NaN), or ValueError naming why not: not JSON, or
    an object that names a key twice (which value counts is the reader's guess)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if isinstance(value, dict | list) and (path := first_duplicate(raw)) is not None:
        raise ValueError(f"the key {path} is given twice")
    return value


def _said(answer: Any) -> str | None:
    """The reason a deny-like answer gives, if it gives one as text."""
    if not isinstance(answer, dict):
        return None
    inner = answer.get("hookSpecificOutput")
    for why in ((inner.get("permissionDecisionReason") if isinstance(inner, dict) else None),
                answer.get("reason")):
        if isinstance(why, str) and why.strip():
            return why[:MAX_REASON]
    return None


def _blocked(why: str) -> Verdict:
    return Verdict("blocked", f"ToolgateUnavailableError: no well-formed decision, so the "
                              f"call is blocked: {why}")


def verdict(raw: bytes, event: str | None) -> Verdict:
    """The verdict held from the service's answer `raw` to a body of `event`."""
    try:
        answer = strict(raw)
    except ValueError as exc:
        return _blocked(f"the answer is {exc}")
    if event == PRE:
        inner = answer.get("hookSpecificOutput") if isinstance(answer, dict) else None
        if (isinstance(inner, dict) and set(answer) == {"hookSpecificOutput"}
                and set(inner) == _PRE_FIELDS and inner["hookEventName"] == PRE
                and inner["permissionDecision"] in ("allow", "ask")
                and isinstance(inner["permissionDecisionReason"], str)):
            return Verdict(inner["permissionDecision"],
                           inner["permissionDecisionReason"][:MAX_REASON])
    elif event in (POST, POST_FAILURE) and answer == {}:
        return Verdict("done", "")
    said = _said(answer)
    if said is not None and _denies(answer):
        return Verdict("blocked", said)
    if event is None:
        return _blocked("the hook body is not a PreToolUse, PostToolUse or "
                        "PostToolUseFailure that toolgate answers")
    return _blocked(f"the answer is not one toolgate gives to a {event}: "
                    f"{raw[:300].decode('utf-8', 'replace')}")


def _denies(answer: dict[str, Any]) -> bool:
    """Whether the answer says deny (or block) in so many words: only then is its reason
    shown as toolgate's. The call is blocked either way."""
    inner = answer.get("hookSpecificOutput")
    return ((isinstance(inner, dict) and inner.get("permissionDecision") == "deny")
            or answer.get("decision") == "block")
