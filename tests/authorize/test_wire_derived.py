"""The hot path's msgspec Structs are read from AuthorizeIn, the one declaration of the
authorize body (app/authorize/wire.py): what the reading cannot state for msgspec stops the
import instead of being dropped, and what it reads is the model's own fields, defaults and
bounds. (tests/authorize/test_wire.py checks, with generated bodies, that both accept the
same bodies with the same values.)"""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest
from pydantic import Field, field_validator

from app.authorize import wire
from app.authorize.schemas import AuthorizeIn, ContextIn, ToolIn
from app.edge.jsonkeys import counts_agree
from app.kit.schemas import Name, Strict
from bench.payload import BODY


def test_every_field_and_default_of_the_model_is_the_structs():
    for model, struct in ((AuthorizeIn, wire.AuthorizeWire), (ContextIn, wire.ContextWire),
                          (ToolIn, wire.ToolWire)):
        assert set(struct.__struct_fields__) == set(model.model_fields)
        decoded = wire.decode_authorize_json(b'{"tool": {"name": "t"}}')
        assert decoded.context.step_retry_count == ContextIn().step_retry_count
    assert wire._DEFAULTS[wire.ContextWire].accumulated_cost == ContextIn().accumulated_cost
    left_out = msgspec.json.decode(b'{"tool": {"name": "t"}}', type=wire.AuthorizeWire)
    assert left_out.context is msgspec.UNSET  # until filled: what the proof counts


@pytest.mark.parametrize("body", [
    BODY,  # the benchmark's body: "step_retry_count": 0, its default
    b'{"plan_id": null, "explain": false, "tool": {"name": "t", "args": {}, "path_args": [],'
    b' "capability": null}, "context": {"dry_run": false, "metadata": {}, "variables": {}}}',
])
def test_members_sent_with_their_default_keep_the_proof_on_the_struct(body):
    """The duplicate-key proof (app/edge/jsonkeys.py) holds on the decoded Struct itself,
    encoded again, for a body that sends members with their default value: no second
    parse of the text (issue 45, the fast path; it was short by one member per default
    sent, so every such body was parsed again by orjson)."""
    decoded = msgspec.json.decode(body, type=wire.AuthorizeWire)
    assert counts_agree(body, msgspec.json.encode(decoded))
    assert wire.decode_authorize_json(body) is not None


def test_a_key_named_twice_still_fails_the_proof():
    body = b'{"tool": {"name": "t", "args": {"cmd": "rm -rf /", "cmd": "ls"}}}'
    decoded = msgspec.json.decode(body, type=wire.AuthorizeWire)
    assert not counts_agree(body, msgspec.json.encode(decoded))
    assert wire.decode_authorize_json(body) is None  # the other way names it (422)


def test_a_bound_of_the_model_is_the_structs():
    with pytest.raises(msgspec.ValidationError, match="max_length|length"):
        msgspec.json.decode(b'{"tool": {"name": "t", "path_args": ["' + b'a' * 201 + b'"]}}',
                            type=wire.AuthorizeWire)
    with pytest.raises(msgspec.ValidationError, match=r"\$\.tool\.name"):
        msgspec.json.decode(b'{"tool": {"name": "a\\n"}}', type=wire.AuthorizeWire)
    with pytest.raises(msgspec.ValidationError, match="<= 1000000000000"):
        msgspec.json.decode(b'{"tool": {"name": "t"}, "context": {"estimated_cost": 1e13}}',
                            type=wire.AuthorizeWire)


def test_a_constraint_msgspec_cannot_state_stops_the_reading():
    class Odd(Strict):
        steps: Annotated[int, Field(multiple_of=2)] = 0

    with pytest.raises(TypeError, match="MultipleOf"):
        wire._struct(Odd, "OddWire")


def test_a_validator_the_hot_path_does_not_apply_stops_the_reading():
    class Checked(Strict):
        name: Name

        @field_validator("name")
        @classmethod
        def _no_admin(cls, value: str) -> str:
            if value == "admin":
                raise ValueError("no")
            return value

    with pytest.raises(TypeError, match="validator"):
        wire._struct(Checked, "CheckedWire")
