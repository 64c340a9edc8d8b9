"""The authorize body as the hot path decodes it: msgspec Structs with the same fields,
defaults and constraints as AuthorizeIn (app/authorize/schemas.py).

Under load, pydantic's validation of this body cost a worker about 10 µs a request, a tenth
of its time; msgspec checks the same types in C for a fraction of that. pydantic stays the
contract: the OpenAPI document, the FastAPI route, and every error message come from
AuthorizeIn. `decode_authorize` takes msgspec's answer only when it accepts a body; anything
it refuses goes to AuthorizeIn, which names the fields exactly as on every other route (or
accepts the body, where msgspec is the stricter of the two). tests/authorize/test_wire.py checks
with generated bodies that whatever msgspec accepts, pydantic accepts with the same values.

Both decoders start from the same orjson parse, so the JSON itself (duplicate keys, numbers
too large for a double, lone surrogates) is read exactly once, one way. The hot path first
tries `decode_authorize_json`, which reads and checks the raw body in one msgspec pass (two
libraries' passes and the intermediate dicts cost a worker 4.5 µs a request). It answers only
where that pass provably reads the body as orjson does, and says None otherwise: then the
body goes the way above. msgspec and orjson differ on exactly one thing here, integers past
64 bits (msgspec keeps them, orjson reads a float), so a body with a run of 19 digits is left
to orjson; tests/authorize/test_wire.py checks the rest with generated JSON texts.

The free-form fields' limits (app/edge/freeform.py: depth, entries) are not something
msgspec's types can state, so both ways check them with AuthorizeIn's own walk: always after
`msgspec.convert`, and after the one pass only for a body with enough brackets or commas
to break them (freeform.may_exceed: one byte count on the text the digit search makes
anyway, where the walk would cost about as much as the decoding; nearly every body skips
it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import orjson
from pydantic import ValidationError

from app.authorize.schemas import MAX_PATH_ARGS, AuthorizeIn, core_context, core_tool
from app.edge import freeform
from app.edge.jsonkeys import counts_agree
from app.kit.schemas import NAME_PATTERN
from app.policy.model import Context, RegisteredTool, Tool
from app.policy.paths import root_refusal
from app.policy.profiles import MAX_COST, SafetyProfile

# Python's `$` also matches before a final newline; pydantic's (Rust) regex does not.
Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN.removesuffix("$") + r"\Z")]
# orjson never yields inf or nan; MAX_COST as in AuthorizeIn (docs/ledger.md)
Cost = Annotated[float, msgspec.Meta(ge=0, le=MAX_COST)]


def _max(length: int) -> Any:
    return msgspec.Meta(max_length=length)


class _Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """omit_defaults: encoded again, a decoded body holds only members it was sent, which
    is what the duplicate-key proof counts (app/edge/jsonkeys.py)."""


class CapabilityWire(_Strict):
    writes: bool | None = None
    read_only: bool | None = None
    checkpointable: bool | None = None
    unsafe: bool | None = None


class ToolWire(_Strict):
    name: Name
    capability: CapabilityWire | None = None
    safety_category: Literal["safe", "destructive"] | None = None
    skill_category: Annotated[str, _max(200)] | None = None
    args: dict[str, Any] = {}
    path_args: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=200)]],
                         _max(MAX_PATH_ARGS)] = []


class ContextWire(_Strict, frozen=True):  # frozen: one shared default instance
    plan_id: Name | None = None
    sandbox_id: Annotated[str, _max(200)] | None = None
    sandbox_root: Annotated[str, _max(4096)] | None = None
    variables: dict[str, Any] = {}
    plan_read_only: bool = False
    require_checkpoints: bool = False
    metadata: dict[str, Any] = {}
    accumulated_cost: Cost = 0.0
    total_accumulated_cost: Cost = 0.0
    step_retry_count: Annotated[int, msgspec.Meta(ge=0)] = 0
    dry_run: bool = False
    confirmed: bool = False
    step_id: Name | None = None
    estimated_cost: Cost | None = None


_NO_CONTEXT = ContextWire()


class AuthorizeWire(_Strict):
    """What decide() reads of an authorize request; AuthorizeIn has the same attributes."""

    tool: ToolWire
    plan_id: Name | None = None
    # Decoded as any JSON value, then replaced by the SafetyProfile pydantic builds from it
    # (decode_authorize): one validator for profiles, wherever they arrive.
    safety_profile: Any = None
    layer: Literal["runtime", "skill", "changeset"] = "runtime"
    explain: bool = False
    # A default value, not a factory: omitted when encoded again, as absent.
    context: ContextWire = _NO_CONTEXT

    def core_context(self, *, plan_id: str | None, stored_read_only: bool) -> Context:
        return core_context(self, plan_id=plan_id, stored_read_only=stored_read_only)

    def core_tool(self, registered: RegisteredTool | None) -> Tool:
        return core_tool(self, registered)

    def within_limits(self) -> bool:
        """Whether the free-form fields are within edge/freeform.py's limits, which msgspec
        cannot state: AuthorizeIn's FreeForm checks them with the same walk."""
        problem = freeform.problem
        return (problem(self.tool.args) is None and problem(self.context.metadata) is None
                and problem(self.context.variables) is None)


def _refused_root(wire: AuthorizeWire) -> bool:
    """A sandbox_root ContextIn refuses (a `..` segment): msgspec's constraints cannot say
    it, so it is checked here with ContextIn's own function."""
    root = wire.context.sandbox_root
    return root is not None and root_refusal(root) is not None


def decode_authorize(data: Any) -> AuthorizeWire | AuthorizeIn:
    """The request in `data` (parsed JSON); raises pydantic's ValidationError, naming the
    fields, for a body AuthorizeIn refuses."""
    try:
        wire = msgspec.convert(data, AuthorizeWire, strict=True)
        if _refused_root(wire):
            return AuthorizeIn.model_validate(data)  # refused, in AuthorizeIn's words
        if wire.safety_profile is not None:
            if wire.plan_id is not None:  # refused; AuthorizeIn says why
                return AuthorizeIn.model_validate(data)
            wire.safety_profile = SafetyProfile.model_validate(wire.safety_profile)
    except (msgspec.ValidationError, ValidationError):
        return AuthorizeIn.model_validate(data)
    if not wire.within_limits():  # refused; AuthorizeIn names the place
        return AuthorizeIn.model_validate(data)
    return wire


_DECODER = msgspec.json.Decoder(AuthorizeWire, strict=True)
_ENCODER = msgspec.json.Encoder()


def _no_duplicate_key(raw: bytes, wire: AuthorizeWire) -> bool:
    """Whether `raw` provably names no key twice in one object (app/edge/jsonkeys.py): the
    decoded Struct encoded again (only the members it was sent: omit_defaults) has as
    many colons as the text. Where a member sent with its default value makes the Struct
    count short, the same count on the plain decoding. False: the other way looks closely
    and names the key."""
    # orjson for the plain one: faster both ways, and the text has no number past 64 bits
    # (the caller left those to the other way already).
    return (counts_agree(raw, _ENCODER.encode(wire))
            or counts_agree(raw, orjson.dumps(orjson.loads(raw))))
# 19 digits in a row: a number that may be past 64 bits, where orjson and msgspec part ways
# (digits inside strings match too, and merely take the other way). Found by mapping every
# digit to "0" and anything else to " ", then one substring search: 0.5 µs, where a regex
# took 4.4 µs for this body. The same mapping keeps commas and reads "{" as "[", which is
# what freeform.may_exceed counts.
_DIGITS = bytes(48 if 48 <= b <= 57 else 91 if b in b"{[" else 44 if b == 44 else 32
                for b in range(256))
_LONG_NUMBER = b"0" * 19


def decode_authorize_json(raw: bytes) -> AuthorizeWire | None:
    """`raw` decoded and checked in one pass, or None: then `orjson.loads` and
    `decode_authorize` must say what it is (valid or not, and why)."""
    text = raw.translate(_DIGITS)
    if _LONG_NUMBER in text:
        return None
    try:
        wire = _DECODER.decode(raw)
        if not _no_duplicate_key(raw, wire) or _refused_root(wire):
            return None
        if wire.safety_profile is not None:
            if wire.plan_id is not None:
                return None  # refused, in AuthorizeIn's words
            wire.safety_profile = SafetyProfile.model_validate(wire.safety_profile)
    except Exception:  # malformed, refused, or nested past msgspec's depth: the other way says
        return None
    if freeform.may_exceed(text) and not wire.within_limits():
        return None  # past the free-form limits: AuthorizeIn says where
    return wire
