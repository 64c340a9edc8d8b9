"""The hot path's msgspec decoder against the contract, AuthorizeIn (pydantic).

decode_authorize may only take a shortcut: for any parsed body it must accept exactly what
AuthorizeIn accepts, with the same values and types (they reach the core and the log), and
refuse with AuthorizeIn's own errors. Bodies are generated around the valid ones: every field
gets values of the right type, the wrong type, at and past its limits, and unknown keys.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.authorize.schemas import AuthorizeIn
from app.authorize.wire import AuthorizeWire, decode_authorize, decode_authorize_json
from app.edge import freeform
from app.edge.freeform import MAX_DEPTH, MAX_ENTRIES
from app.policy.tool import MissingCapability

I64 = 2**63 - 1

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-I64, I64), st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, -0.0, 1.0, -1.5]),
    st.text(max_size=4),
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
names = st.one_of(
    st.sampled_from(["fs.write_file", "a", "A9._:@-z", "x" * 200, "x" * 201, "a\n", "\na",
                     "-a", "a b", "", "é", "a/b", "bench-plan-0001"]),
    st.text(max_size=6),
)
bounded_text = st.one_of(
    st.text(max_size=4), st.sampled_from(["", "é" * 200, "é" * 201, "x" * 4096, "x" * 4097,
                                          "a\x00b"]))
costs = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-3, 10**6),
                  st.sampled_from([0, 0.0, -0.0, -1e-300, 1e308]))
flags = st.one_of(st.booleans(), st.none(), st.integers(0, 1), st.sampled_from(["true", 0.0]))


def _nest(value: Any, containers: list[str]) -> Any:
    for kind in containers:
        value = [value] if kind == "list" else {"k": value}
    return value


# Values at and past the free-form limits (app/edge/freeform.py): 32 levels, the field's
# object being the first, and 10,000 entries per object or array.
limit_values = st.one_of(
    st.builds(_nest, json_values, st.lists(st.sampled_from(["list", "dict"]),
                                           min_size=MAX_DEPTH - 3, max_size=MAX_DEPTH + 1)),
    st.builds(lambda n, leaf: [leaf] * n, st.sampled_from([MAX_ENTRIES, MAX_ENTRIES + 1]),
              st.sampled_from([0, [], {}])),
    st.builds(lambda n: {str(i): i for i in range(n)},
              st.sampled_from([MAX_ENTRIES, MAX_ENTRIES + 1])),
)
free_form = st.one_of(
    st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    st.dictionaries(st.text(max_size=4), limit_values, min_size=1, max_size=2),
)


# Valid values, near their limits.
valid_names = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,12}", fullmatch=True),
                        st.sampled_from(["x" * 200, "fs.write_file"]))
valid_text = st.one_of(st.text(max_size=6), st.sampled_from(["", "é" * 200, "a\x00b"]))
valid_costs = st.one_of(st.floats(min_value=0, allow_infinity=False),
                        st.integers(0, 10**6), st.sampled_from([0, -0.0, 1e308]))
optional_flags = st.one_of(st.none(), st.booleans())
capabilities = st.fixed_dictionaries({}, optional={
    "writes": optional_flags, "read_only": optional_flags, "checkpointable": optional_flags,
    "unsafe": optional_flags})
tools = st.fixed_dictionaries({"name": valid_names}, optional={
    "capability": st.one_of(st.none(), capabilities),
    "safety_category": st.sampled_from(["safe", "destructive", None]),
    "skill_category": st.one_of(st.none(), valid_text), "args": free_form})
# Roots around the one ContextIn refuses (a `..` segment in any reading, issue 22).
roots = st.sampled_from(["/sandbox", "/sandbox/..", "/sandbox/../x", "/a..b", "/sb/‥", "/sb/．．",
                         "/sb/%2e%2e", "/sb/%252e%252e", "/sb/%41", "/sb\\..", "/sb/.", "..",
                         "/sb/%25252525", "/sb/%c0%ae"])
contexts = st.fixed_dictionaries({}, optional={
    "plan_id": st.one_of(st.none(), valid_names),
    "sandbox_id": st.one_of(st.none(), valid_text),
    "sandbox_root": st.one_of(st.none(), valid_text, st.just("x" * 4096), roots),
    "variables": free_form, "metadata": free_form,
    "plan_read_only": st.booleans(), "require_checkpoints": st.booleans(),
    "accumulated_cost": valid_costs, "total_accumulated_cost": valid_costs,
    "step_retry_count": st.one_of(st.integers(0, 5), st.just(I64)),
    "dry_run": st.booleans(), "confirmed": st.booleans()})
profiles = st.fixed_dictionaries({}, optional={
    "require_sandbox": st.booleans(), "allow_unsafe_tools": st.booleans(),
    "allowed_skill_categories": st.lists(st.text(min_size=1, max_size=4), max_size=2),
    "max_cost_per_plan": st.one_of(st.none(), valid_costs),
    "max_retries_per_step": st.integers(0, 100)})
valid_bodies = st.one_of(
    st.fixed_dictionaries({"tool": tools}, optional={
        "plan_id": st.one_of(st.none(), valid_names),
        "layer": st.sampled_from(["runtime", "skill", "changeset"]),
        "explain": st.booleans(), "context": contexts}),
    st.fixed_dictionaries({"tool": tools, "safety_profile": profiles}, optional={
        "plan_id": st.none(), "context": contexts}),
)

# Then one thing wrong: a value of the wrong type or past a limit, a field missing, an
# unknown field, at any depth.
nasty = st.one_of(scalars, names, bounded_text, costs, flags, json_values,
                  st.sampled_from(["Safe", "RUNTIME", -1, 101, 1.0, True, {}, []]))
PATHS = [(), ("tool",), ("context",), ("safety_profile",), ("tool", "capability")]


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    body = draw(valid_bodies)
    target = body
    for key in draw(st.sampled_from(PATHS)):
        if not isinstance(target.get(key), dict):
            return body
        target = target[key]
    key = draw(st.one_of(st.sampled_from(sorted(target) or ["unknown"]),
                         st.sampled_from(["unknown", "name", "plan_id", "safety_profile",
                                          "step_retry_count", "writes", "max_retries_per_step",
                                          "allowed_skill_categories"])))
    if draw(st.booleans()) and key in target:
        del target[key]
    else:
        target[key] = draw(nasty)
    return body


bodies = st.one_of(valid_bodies, mutated(), json_values)


def _parsed(body: Any) -> Any:
    """What the fast path hands the decoder: the body as orjson reads it off the wire."""
    return orjson.loads(orjson.dumps(body))


def _view(request: AuthorizeIn | AuthorizeWire) -> str:
    """Every value decide() can read, with its type (repr tells 1 from 1.0 and True)."""
    t, c = request.tool, request.context
    cap = t.capability
    return repr((
        request.plan_id, request.safety_profile, request.layer, request.explain,
        t.name, None if cap is None else (cap.writes, cap.read_only, cap.checkpointable,
                                          cap.unsafe),
        t.safety_category, t.skill_category, t.args,
        c.plan_id, c.sandbox_id, c.sandbox_root, c.variables, c.plan_read_only,
        c.require_checkpoints, c.metadata, c.accumulated_cost, c.total_accumulated_cost,
        c.step_retry_count, c.dry_run, c.confirmed,
    ))


def _core(request: AuthorizeIn | AuthorizeWire) -> Any:
    try:
        tool = request.core_tool(None)
    except MissingCapability as missing:
        tool = ("missing", missing.fields)
    return tool, request.core_context(plan_id="p", stored_read_only=False)


def _errors(exc: ValidationError) -> list[Any]:
    return exc.errors(include_url=False, include_context=False)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_decoder_accepts_and_refuses_exactly_what_authorize_in_does(body: Any) -> None:
    data = _parsed(body)
    try:
        expected = AuthorizeIn.model_validate(data)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as refused:
            decode_authorize(data)
        assert _errors(refused.value) == _errors(exc)
        return
    got = decode_authorize(data)
    assert _view(got) == _view(expected)
    assert _core(got) == _core(expected)


@pytest.mark.parametrize("body", [
    {"tool": {"name": "t"}, "plan_id": "p-1"},
    {"tool": {"name": "t", "capability": {"writes": True}, "args": {"n": 1}},
     "context": {"accumulated_cost": 1, "metadata": {"k": [1, 2.5]}, "sandbox_id": ""},
     "layer": "skill", "explain": True},
    {"tool": {"name": "t"}, "safety_profile": {"max_cost_per_plan": 5}},
])
def test_valid_bodies_take_the_msgspec_path(body: dict[str, Any]) -> None:
    """The shortcut is taken for the bodies agents send, the inline profile included."""
    got = decode_authorize(_parsed(body))
    assert isinstance(got, AuthorizeWire)
    assert _view(got) == _view(AuthorizeIn.model_validate(_parsed(body)))


@pytest.mark.parametrize("body, field", [
    ({"tool": {"name": "a\n"}}, "tool.name"),
    ({"tool": {"name": "t"}, "plan_id": "p", "safety_profile": {}}, "safety_profile"),
    ({"tool": {"name": "t"}, "safety_profile": {"max_retries_per_step": 101}},
     "safety_profile.max_retries_per_step"),
    ({"tool": {"name": "t"}, "context": {"step_retry_count": 1.5}},
     "context.step_retry_count"),
    ({"tool": {"name": "t", "colour": "red"}}, "tool.colour"),
    ({"tool": {"name": "t"}, "context": {"sandbox_root": "/sandbox/.."}}, "context.sandbox_root"),
    ({"tool": {"name": "t"}, "context": {"sandbox_root": "/sb/‥"}}, "context.sandbox_root"),
    ({"tool": {"name": "t"}, "context": {"sandbox_root": "/sb/%252e%252e"}},
     "context.sandbox_root"),
])
def test_refusals_are_authorize_in_errors(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        decode_authorize(_parsed(body))
    assert field in [".".join(map(str, e["loc"])) for e in refused.value.errors()]


# Numbers around 64 bits, where orjson reads floats and msgspec exact integers.
wide_ints = st.one_of(st.integers(-2**70, 2**70),
                      st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1,
                                       10**18, 10**19, -10**19]))
wide_values = st.recursive(
    st.one_of(scalars, wide_ints, st.text(alphabet="\u00e9\U0001f600\"\\/\n\x00a", max_size=3)),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


@st.composite
def json_texts(draw: st.DrawFn) -> bytes:
    """A body as an agent's JSON library might write it: escaped or raw UTF-8, spaced or
    compact, with numbers past 64 bits in the free-form fields or the retry count."""
    body = draw(bodies)
    if isinstance(body, dict) and draw(st.booleans()):
        context = body.setdefault("context", {})
        if isinstance(context, dict):
            context[draw(st.sampled_from(["metadata", "variables", "step_retry_count"]))] = (
                draw(wide_ints) if draw(st.booleans()) else {"n": draw(wide_values)})
    text = json.dumps(body, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    return text.encode()


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_texts())
def test_one_pass_decoder_reads_bodies_as_orjson_and_authorize_in_do(raw: bytes) -> None:
    """decode_authorize_json answers only where it agrees with orjson + decode_authorize."""
    got = decode_authorize_json(raw)
    if got is None:
        return
    expected = AuthorizeIn.model_validate(orjson.loads(raw))
    assert _view(got) == _view(expected)
    assert _core(got) == _core(expected)


@pytest.mark.parametrize("raw", [
    b'{"tool":{"name":"t","args":{"n":18446744073709551616}}}',  # orjson: a float
    b'{"tool":{"name":"t"},"context":{"step_retry_count":99999999999999999999}}',
    b'{"tool":{"name":"t","args":{"s":"\\ud800"}}}',  # a lone surrogate: invalid JSON
    b'\xef\xbb\xbf{"tool":{"name":"t"}}',  # a byte order mark: invalid JSON
    b'{"tool":{"name":"t","args":{"x":' + b"[" * 1100 + b"]" * 1100 + b"}}}",  # too deep
    b'{"tool":{"name":"t"},"plan_id":"p","safety_profile":{}}',  # refused by AuthorizeIn
    b'{"tool":{"name":"t"},"context":{"sandbox_root":"/sandbox/.."}}',  # refused by ContextIn
    b'{"tool":{"name":"t"}} x', b"[]", b"",
])
def test_one_pass_decoder_leaves_the_unusual_to_orjson(raw: bytes) -> None:
    assert decode_authorize_json(raw) is None


def test_one_pass_decoder_takes_what_agents_send() -> None:
    raw = (b'{"plan_id":"p-1","tool":{"name":"fs.write_file","capability":{"writes":true},'
           b'"args":{"path":"a.py","n":1834,"id":123456789012345678}},'
           b'"context":{"metadata":{"a":"\\u00e9"},"accumulated_cost":1.25}}')
    got = decode_authorize_json(raw)
    assert isinstance(got, AuthorizeWire)
    assert _view(got) == _view(AuthorizeIn.model_validate(orjson.loads(raw)))


# The free-form limits hold in every decoder: the one pass, msgspec.convert, AuthorizeIn.
def _at(field: str, value: Any) -> dict[str, Any]:
    outer, inner = field.split(".")
    body: dict[str, Any] = {"tool": {"name": "t"}}
    body.setdefault(outer, {})[inner] = {"x": value}
    return body


@pytest.mark.parametrize("field", ["tool.args", "context.metadata", "context.variables"])
@pytest.mark.parametrize("value", [
    _nest(1, ["list"] * (MAX_DEPTH - 1)), _nest(1, ["dict"] * (MAX_DEPTH - 1)),
    [0] * MAX_ENTRIES, dict.fromkeys(map(str, range(MAX_ENTRIES)), 0),
    {"a": [{"b": [0] * MAX_ENTRIES}]},
])
def test_values_at_the_free_form_limits_take_the_msgspec_path(field: str, value: Any) -> None:
    body = _at(field, value)
    raw = orjson.dumps(body)
    for got in (decode_authorize_json(raw), decode_authorize(orjson.loads(raw))):
        assert isinstance(got, AuthorizeWire)
        assert _view(got) == _view(AuthorizeIn.model_validate(orjson.loads(raw)))


@pytest.mark.parametrize("field", ["tool.args", "context.metadata", "context.variables"])
@pytest.mark.parametrize("value, below, kind", [
    (_nest(1, ["list"] * MAX_DEPTH), (0,) * (MAX_DEPTH - 1), "too_deep"),
    (_nest(1, ["dict"] * MAX_DEPTH), ("k",) * (MAX_DEPTH - 1), "too_deep"),
    (_nest(1, ["list"] * 250), (0,) * (MAX_DEPTH - 1), "too_deep"),
    ([0] * (MAX_ENTRIES + 1), (), "too_long"),
    ({"a": [0, {"b": dict.fromkeys(map(str, range(MAX_ENTRIES + 1)), 0)}]}, ("a", 1, "b"),
     "too_long"),
])
def test_values_past_the_free_form_limits_are_refused_naming_the_place(
        field: str, value: Any, below: tuple[Any, ...], kind: str) -> None:
    body = _at(field, value)
    raw = orjson.dumps(body)
    assert decode_authorize_json(raw) is None
    with pytest.raises(ValidationError) as refused:
        decode_authorize(orjson.loads(raw))
    with pytest.raises(ValidationError) as contract:
        AuthorizeIn.model_validate(orjson.loads(raw))
    assert _errors(refused.value) == _errors(contract.value)
    [error] = _errors(refused.value)
    assert error["type"] == kind
    assert error["loc"] == (*field.split("."), "x", *below)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(limit_values, json_values, free_form))
def test_the_byte_count_never_skips_a_value_past_the_limits(value: Any) -> None:
    """The one pass walks the free-form fields only when freeform.may_exceed says the text
    might hold something past the limits: it must never say no to such a text."""
    from app.authorize.wire import _DIGITS

    text = json.dumps({"context": {"metadata": {"v": value}}},
                      separators=(",", ":")).encode()
    if not freeform.may_exceed(text.translate(_DIGITS)):
        assert freeform.problem({"v": value}) is None
