"""The authorize body as the hot path decodes it: msgspec Structs derived from AuthorizeIn
(app/authorize/schemas.py), its one declaration.

Under load, pydantic's validation of this body cost a worker about 10 µs a request, a tenth
of its time; msgspec checks the same types in C for a fraction of that. AuthorizeIn is the
contract: the OpenAPI document, the FastAPI route, every error message, and (read once at
import, below) the Structs' fields, defaults and constraints come from it, so a field added
or a bound changed there is the hot path's too, and a constraint the reading cannot state
for msgspec stops the import. `decode_authorize` takes msgspec's answer only when it
accepts a body; anything it refuses goes to AuthorizeIn, which names the fields exactly as
on every other route (or accepts the body, where msgspec is the stricter of the two).
tests/authorize/test_wire.py checks with generated bodies that whatever msgspec accepts,
pydantic accepts with the same values.

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

import types
import typing
from typing import Annotated, Any, Literal, Union

import annotated_types as at
import msgspec
from pydantic import AllowInfNan, BaseModel, StringConstraints, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.authorize.schemas import (
    AuthorizeIn,
    CapabilityIn,
    ContextIn,
    ToolIn,
    core_context,
    core_tool,
)
from app.edge import freeform
from app.edge.jsonkeys import counts_agree
from app.policy.model import Context, RegisteredTool, Tool
from app.policy.numbers import INTEGRAL
from app.policy.paths import root_refusal
from app.policy.profiles import SafetyProfile

# --- the Structs, derived from the pydantic models ---------------------------------------
# AuthorizeIn is the one declaration of the body. Its fields, defaults and constraints are
# read here, once at import, into msgspec Structs; a constraint this reading does not know
# is an error at import, never a check silently dropped. What msgspec's types cannot state
# is checked beside the decoding, each by the model's own function: the free-form limits
# (within_limits: freeform.problem, the AfterValidator's walk), a climbing sandbox_root
# (_refused_root: root_refusal, the field validator's function) and a profile only without a
# plan_id (decode_authorize). Integral floats (INTEGRAL) are not read: msgspec's strict int
# refuses 3.0, and such a body goes to AuthorizeIn, which takes it.
_NOT_READ = (typing.get_args(freeform.FreeForm)[1], INTEGRAL, AllowInfNan(False))
_FIELD_VALIDATORS = {ContextIn: {"sandbox_root"}, AuthorizeIn: {"safety_profile"}}


def _constraints(metadata: typing.Iterable[Any]) -> dict[str, Any]:
    """pydantic's constraints as msgspec.Meta's keywords."""
    out: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):  # Field(...) inside an Annotated
            out.update(_constraints(item.metadata))
        elif isinstance(item, StringConstraints):
            for key in ("min_length", "max_length"):
                if getattr(item, key) is not None:
                    out[key] = getattr(item, key)
            if item.pattern is not None:
                # pydantic's (Rust) `$` is the end; Python's also matches before a final \n
                out["pattern"] = str(item.pattern).removesuffix("$") + r"\Z"
        elif isinstance(item, at.Ge | at.Le | at.Gt | at.Lt):
            key = type(item).__name__.lower()
            out[key] = getattr(item, key)
        elif isinstance(item, at.MinLen | at.MaxLen):
            key = "min_length" if isinstance(item, at.MinLen) else "max_length"
            out[key] = getattr(item, key)
        elif item not in _NOT_READ:
            raise TypeError(f"app/authorize/wire.py cannot state {item!r} for msgspec")
    return out


_STRUCTS: dict[type[BaseModel], Any] = {}


def _wire_type(hint: Any, metadata: typing.Iterable[Any] = ()) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _wire_type(args[0], [*args[1:], *metadata])
    meta = _constraints(metadata)
    if origin in (Union, types.UnionType):
        wired: Any = Union[tuple(_wire_type(a) for a in args)]  # noqa: UP007
    elif origin is list:
        wired = list[_wire_type(args[0])]  # type: ignore[misc]
    elif origin is dict:
        wired = dict[_wire_type(args[0]), _wire_type(args[1])]  # type: ignore[misc]
    elif origin is Literal or hint in (str, int, float, bool, type(None), Any):
        wired = hint
    elif hint is SafetyProfile:
        # Decoded as any JSON value, then replaced by the SafetyProfile pydantic builds from
        # it (decode_authorize): one validator for profiles, wherever they arrive.
        wired = Any
    elif isinstance(hint, type) and issubclass(hint, BaseModel):
        wired = _STRUCTS[hint]
    else:
        raise TypeError(f"app/authorize/wire.py cannot state {hint!r} for msgspec")
    return Annotated[wired, msgspec.Meta(**meta)] if meta else wired


_FILLS: dict[Any, Any] = {}  # Struct -> its fill(struct) (below)


def _struct(model: type[BaseModel], name: str, *,
            namespace: dict[str, Any] | None = None) -> Any:
    """The Struct of `model`: every field with a default decodes as UNSET when the body
    leaves it out, so that encoded again the Struct holds exactly the members it was sent
    (UNSET is never encoded; a member sent with its default value is), which is what the
    duplicate-key proof counts (app/edge/jsonkeys.py). `_FILLS[struct]` then gives each
    UNSET its default, before anything reads the request."""
    # Strict's NUL rule is the hot path's too: decode_authorize_json leaves a body holding
    # a NUL (escaped, the only way JSON holds one) to AuthorizeIn, as decode_authorize does.
    checked = {f for name, v in model.__pydantic_decorators__.field_validators.items()
               if name != "_no_nul" for f in v.info.fields}
    if checked != _FIELD_VALIDATORS.get(model, set()) \
            or model.__pydantic_decorators__.model_validators:
        raise TypeError(f"{model.__name__} has a validator app/authorize/wire.py does not apply")
    fields: list[Any] = []
    fills: list[str] = []
    scope: dict[str, Any] = {"UNSET": msgspec.UNSET}
    for field_name, info in model.model_fields.items():
        hint = _wire_type(info.annotation, info.metadata)
        factory = info.default_factory
        default = f"_{field_name}"
        if info.default is not PydanticUndefined:
            scope[default] = info.default  # None, a bool, a number, a string: immutable
        elif factory in (dict, list):
            default = "{}" if factory is dict else "[]"  # a new one per request
        elif isinstance(factory, type) and issubclass(factory, BaseModel):
            # A copy of the model's Struct with every default (shallow, in C).
            scope[default] = _DEFAULTS[_STRUCTS[factory]]
            default = f"{default}.__copy__()"
        elif factory is None:  # required
            fields.append((field_name, hint))
            inner = _inner_struct(info.annotation)
            if inner is not None:
                scope[f"fill_{field_name}"] = _FILLS[_STRUCTS[inner]]
                fills.append(f"    fill_{field_name}(s.{field_name})")
            continue
        else:
            raise TypeError(f"{model.__name__}.{field_name}: a default_factory of {factory!r}")
        fields.append((field_name, hint | msgspec.UnsetType, msgspec.UNSET))
        fills.append(f"    if s.{field_name} is UNSET:\n        s.{field_name} = {default}")
        inner = _inner_struct(info.annotation)
        if inner is not None:  # a sent member that is itself a Struct: filled in turn
            scope[f"fill_{field_name}"] = _FILLS[_STRUCTS[inner]]
            fills.append(f"    elif s.{field_name} is not None:\n"
                         f"        fill_{field_name}(s.{field_name})")
    struct = msgspec.defstruct(
        name, fields, kw_only=True, forbid_unknown_fields=True,
        namespace=namespace, module=__name__)
    # Straight-line code, one test per field: a loop over the fields cost twice as much.
    exec(compile("def fill(s):\n" + ("\n".join(fills) or "    pass") + "\n    return s\n",
                 f"<fill {name}>", "exec"), scope)
    _FILLS[struct] = scope["fill"]
    _STRUCTS[model] = struct
    _DEFAULTS[struct] = scope["fill"](struct()) if not any(len(f) == 2 for f in fields) \
        else None
    return struct


_DEFAULTS: dict[Any, Any] = {}  # Struct -> its instance with every default (when it has one)


def _inner_struct(hint: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, or or-None), when it has a Struct."""
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and issubclass(arg, BaseModel) and arg in _STRUCTS:
            return arg
    return None


def _within_limits(self: Any) -> bool:
    """Whether the free-form fields are within edge/freeform.py's limits, which msgspec
    cannot state: AuthorizeIn's FreeForm checks them with the same walk."""
    problem = freeform.problem
    return (problem(self.tool.args) is None and problem(self.context.metadata) is None
            and problem(self.context.variables) is None)


def _core_context(self: Any, *, plan_id: str | None, stored_read_only: bool) -> Context:
    return core_context(self, plan_id=plan_id, stored_read_only=stored_read_only)


def _core_tool(self: Any, registered: RegisteredTool | None) -> Tool:
    return core_tool(self, registered)


CapabilityWire = _struct(CapabilityIn, "CapabilityWire")
ToolWire = _struct(ToolIn, "ToolWire")
ContextWire = _struct(ContextIn, "ContextWire")
# What decide() reads of an authorize request; AuthorizeIn has the same attributes.
AuthorizeWire = _struct(AuthorizeIn, "AuthorizeWire", namespace={
    "core_context": _core_context, "core_tool": _core_tool, "within_limits": _within_limits})


def _refused_root(wire: AuthorizeWire) -> bool:
    """A sandbox_root ContextIn refuses (a `..` segment): msgspec's constraints cannot say
    it, so it is checked here with ContextIn's own function."""
    root = wire.context.sandbox_root
    return root is not None and root_refusal(root) is not None


_FILL = _FILLS[AuthorizeWire]


def _holds_nul(wire: AuthorizeWire) -> bool:
    """Whether a string field of the request (or of its tool, capability, context), or a
    list of strings, holds a NUL: Strict's rule, which AuthorizeIn then applies."""
    for struct in (wire, wire.tool, wire.tool.capability, wire.context):
        if struct is None:
            continue
        for name in struct.__struct_fields__:
            value = getattr(struct, name)
            if isinstance(value, str) and "\x00" in value or isinstance(value, list) and any(
                    isinstance(item, str) and "\x00" in item for item in value):
                return True
    return False


def decode_authorize(data: Any) -> AuthorizeWire | AuthorizeIn:
    """The request in `data` (parsed JSON); raises pydantic's ValidationError, naming the
    fields, for a body AuthorizeIn refuses."""
    try:
        wire = _FILL(msgspec.convert(data, AuthorizeWire, strict=True))
        if _holds_nul(wire):
            return AuthorizeIn.model_validate(data)  # refused by Strict's rule, or accepted
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
    decoded Struct, before its UNSETs are filled, encoded again (exactly the members it was
    sent) has as many colons as the text. False: a key may repeat, and the other way
    parses the text again, looks closely and names the key."""
    return counts_agree(raw, _ENCODER.encode(wire))
# 19 digits in a row: a number that may be past 64 bits, where orjson and msgspec part ways
# (digits inside strings match too, and merely take the other way). Found by mapping every
# digit to "0" and anything else to " ", then one substring search: 0.5 µs, where a regex
# took 4.4 µs for this body. The same mapping keeps commas and reads "{" as "[", which is
# what freeform.may_exceed counts.
_DIGITS = bytes(48 if 48 <= b <= 57 else 91 if b in b"{[" else 44 if b == 44 else 32
                for b in range(256))
_LONG_NUMBER = b"0" * 19
_NUL = b"\\u0000"  # JSON holds a NUL only escaped: Strict's rule, AuthorizeIn's words


def decode_authorize_json(raw: bytes) -> AuthorizeWire | None:
    """`raw` decoded and checked in one pass, or None: then `orjson.loads` and
    `decode_authorize` must say what it is (valid or not, and why)."""
    text = raw.translate(_DIGITS)
    if _LONG_NUMBER in text or _NUL in raw:
        return None
    try:
        wire = _DECODER.decode(raw)
        if not _no_duplicate_key(raw, wire):
            return None
        _FILL(wire)
        if _refused_root(wire):
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
