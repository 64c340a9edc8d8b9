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
from app.kit.schemas import Name, Strict


def test_every_field_and_default_of_the_model_is_the_structs():
    for model, struct in ((AuthorizeIn, wire.AuthorizeWire), (ContextIn, wire.ContextWire),
                          (ToolIn, wire.ToolWire)):
        assert set(struct.__struct_fields__) == set(model.model_fields)
        decoded = msgspec.json.decode(b'{"tool": {"name": "t"}}', type=wire.AuthorizeWire)
        assert decoded.context.step_retry_count == ContextIn().step_retry_count
    assert wire.ContextWire().accumulated_cost == ContextIn().accumulated_cost


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
