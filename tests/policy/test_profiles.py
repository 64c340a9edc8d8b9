"""SafetyProfile validation and resolution precedence (SPEC §2, seed 000)."""

from __future__ import annotations

import itertools
import math

import pytest
from pydantic import ValidationError

from app.policy.profiles import (
    DEFAULT_SAFETY_PROFILE,
    NamedProfile,
    ProfileRef,
    Provenance,
    Resolved,
    SafetyProfile,
    UnknownProfileError,
    resolve,
)

LEVELS = (Provenance.PLAN, Provenance.ACTION, Provenance.PROJECT, Provenance.GLOBAL)
KWARG = {
    Provenance.PLAN: "plan",
    Provenance.ACTION: "action",
    Provenance.PROJECT: "project",
    Provenance.GLOBAL: "global_",
}
# Inline profiles are possible only at plan and action level.
CHOICES = {
    Provenance.PLAN: ("empty", "name", "inline"),
    Provenance.ACTION: ("empty", "name", "inline"),
    Provenance.PROJECT: ("empty", "name"),
    Provenance.GLOBAL: ("empty", "name"),
}

# Each level gets its own, distinguishable named and inline profile, so the winner is
# visible in every field (a field-by-field merge would mix them).
NAMED = {
    level: NamedProfile(
        name=f"{level.value}-profile",
        version=10 + i,
        safety=SafetyProfile(
            require_sandbox=bool(i % 2),
            allow_unsafe_tools=bool(i % 2),
            max_retries_per_step=10 + i,
            max_cost_per_plan=float(i),
            allowed_skill_categories=[f"named-{level.value}"],
        ),
    )
    for i, level in enumerate(LEVELS)
}
INLINE = {
    level: SafetyProfile(
        require_checkpoints=False,
        max_retries_per_step=50 + i,
        max_total_cost=100.0 + i,
        allowed_skill_categories=[f"inline-{level.value}"],
    )
    for i, level in enumerate(LEVELS[:2])
}
BY_NAME = {p.name: p for p in NAMED.values()}


class Lookup:
    def __init__(self, profiles: dict[str, NamedProfile]) -> None:
        self.profiles = profiles
        self.calls: list[str] = []

    def __call__(self, name: str) -> NamedProfile | None:
        self.calls.append(name)
        return self.profiles.get(name)


def held(level: Provenance, choice: str):
    if choice == "empty":
        return None
    if choice == "name":
        return ProfileRef(NAMED[level].name)
    return INLINE[level]


COMBINATIONS = list(itertools.product(*(CHOICES[level] for level in LEVELS)))


def test_every_combination_is_enumerated() -> None:
    assert len(COMBINATIONS) == 3 * 3 * 2 * 2


@pytest.mark.parametrize("choices", COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def test_first_non_empty_level_wins_as_a_whole(choices: tuple[str, ...]) -> None:
    lookup = Lookup(BY_NAME)
    pairs = list(zip(LEVELS, choices, strict=True))
    kwargs = {KWARG[level]: held(level, choice) for level, choice in pairs}
    result = resolve(**kwargs, lookup=lookup)

    winner = next((lvl for lvl, c in pairs if c != "empty"), None)
    if winner is None:
        assert result == Resolved(DEFAULT_SAFETY_PROFILE, Provenance.GLOBAL, None, None, True)
        assert result.summary() == {
            "provenance": "global", "name": None, "version": None, "is_default": True,
        }
        assert lookup.calls == []
        return

    choice = choices[LEVELS.index(winner)]
    assert result.provenance is winner
    assert result.is_default is False
    if choice == "name":
        named = NAMED[winner]
        assert result.safety == named.safety
        assert (result.name, result.version) == (named.name, named.version)
        assert lookup.calls == [named.name]  # lower levels are never consulted
    else:
        assert result.safety == INLINE[winner]
        assert (result.name, result.version) == (None, None)
        assert lookup.calls == []
    assert result.summary()["provenance"] == winner.value


@pytest.mark.parametrize("level", LEVELS, ids=[lvl.value for lvl in LEVELS])
def test_unknown_name_raises_naming_name_and_level(level: Provenance) -> None:
    lookup = Lookup({})
    with pytest.raises(UnknownProfileError) as raised:
        resolve(**{KWARG[level]: ProfileRef("no-such-profile")}, lookup=lookup)
    assert raised.value.name == "no-such-profile"
    assert raised.value.level is level
    assert "no-such-profile" in str(raised.value)
    assert isinstance(raised.value, LookupError)


def test_unknown_name_at_a_lower_level_is_never_looked_up() -> None:
    lookup = Lookup(BY_NAME)
    result = resolve(
        plan=None, action=ProfileRef(NAMED[Provenance.ACTION].name),
        project=ProfileRef("missing"), global_=ProfileRef("missing-too"), lookup=lookup,
    )
    assert result.provenance is Provenance.ACTION
    assert lookup.calls == [NAMED[Provenance.ACTION].name]


def test_unknown_name_at_the_winning_level_is_not_skipped() -> None:
    """A dangling name does not fall through to a lower level: that would loosen silently."""
    with pytest.raises(UnknownProfileError) as raised:
        resolve(project=ProfileRef("gone"), global_=ProfileRef(NAMED[Provenance.GLOBAL].name),
                lookup=Lookup(BY_NAME))
    assert raised.value.level is Provenance.PROJECT


def test_inline_default_values_are_not_the_default() -> None:
    """An inline profile equal to the defaults still comes from its level."""
    result = resolve(plan=SafetyProfile(), lookup=Lookup({}))
    assert result.safety == DEFAULT_SAFETY_PROFILE
    assert result.provenance is Provenance.PLAN
    assert result.is_default is False


def test_no_field_by_field_merge() -> None:
    """A plan-level profile with only one field set does not inherit from lower levels."""
    plan = SafetyProfile.model_validate({"allow_unsafe_tools": True})
    result = resolve(plan=plan, global_=ProfileRef(NAMED[Provenance.GLOBAL].name),
                     lookup=Lookup(BY_NAME))
    assert result.safety == SafetyProfile(allow_unsafe_tools=True)
    assert result.safety.allowed_skill_categories == []
    assert result.safety.max_retries_per_step == 3


# --- SafetyProfile -------------------------------------------------------------------


def test_defaults_match_seed() -> None:
    assert DEFAULT_SAFETY_PROFILE.model_dump() == {
        "require_sandbox": True,
        "require_checkpoints": True,
        "allow_unsafe_tools": False,
        "require_human_approval": False,
        "allowed_skill_categories": [],
        "max_cost_per_plan": None,
        "max_retries_per_step": 3,
        "max_total_cost": None,
    }
    assert SafetyProfile.model_validate({}) == DEFAULT_SAFETY_PROFILE


VALID = [
    {"require_sandbox": False},
    {"require_checkpoints": False, "allow_unsafe_tools": True, "require_human_approval": True},
    {"allowed_skill_categories": ["fs", "git"]},
    {"allowed_skill_categories": []},
    {"max_cost_per_plan": 0},
    {"max_cost_per_plan": 0.0},
    {"max_cost_per_plan": 12.5, "max_total_cost": 1000},
    {"max_cost_per_plan": None, "max_total_cost": None},
    {"max_retries_per_step": 0},
    {"max_retries_per_step": 100},
    {"max_total_cost": 1e300},
]


@pytest.mark.parametrize("data", VALID, ids=[str(d) for d in VALID])
def test_valid_profiles(data: dict) -> None:
    profile = SafetyProfile.model_validate(data)
    for key, value in data.items():
        assert getattr(profile, key) == value


INVALID = [
    # strict JSON booleans
    ("require_sandbox", "true"),
    ("require_sandbox", 1),
    ("require_checkpoints", 0),
    ("allow_unsafe_tools", "yes"),
    ("require_human_approval", None),
    ("require_human_approval", 1.0),
    # integers
    ("max_retries_per_step", 3.5),  # 3.0 is the integer 3 (SPEC §17)
    ("max_retries_per_step", "3"),
    ("max_retries_per_step", True),
    ("max_retries_per_step", None),
    ("max_retries_per_step", -1),
    ("max_retries_per_step", 101),
    # finite, >= 0 costs
    ("max_cost_per_plan", -0.01),
    ("max_cost_per_plan", -1),
    ("max_cost_per_plan", math.inf),
    ("max_cost_per_plan", math.nan),
    ("max_cost_per_plan", "10"),
    ("max_cost_per_plan", True),
    ("max_total_cost", -math.inf),
    ("max_total_cost", math.inf),
    ("max_total_cost", math.nan),
    ("max_total_cost", -5),
    # allow-list: a list of non-empty strings
    ("allowed_skill_categories", "fs"),
    ("allowed_skill_categories", [""]),
    ("allowed_skill_categories", ["fs", ""]),
    ("allowed_skill_categories", [1]),
    ("allowed_skill_categories", [None]),
    ("allowed_skill_categories", None),
    ("allowed_skill_categories", ("fs",)),  # strict: a tuple is not a JSON list
]


@pytest.mark.parametrize(("field", "value"), INVALID, ids=[f"{f}={v!r}" for f, v in INVALID])
def test_invalid_field_values(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as raised:
        SafetyProfile.model_validate({field: value})
    assert any(e["loc"][:1] == (field,) for e in raised.value.errors())


@pytest.mark.parametrize("field", ["max_cost", "allowUnsafeTools", "name", "require_sandbox "])
def test_unknown_fields_are_rejected(field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        SafetyProfile.model_validate({field: True})
    assert [e["type"] for e in raised.value.errors()] == ["extra_forbidden"]
    assert raised.value.errors()[0]["loc"] == (field,)


def test_every_bad_field_is_named() -> None:
    with pytest.raises(ValidationError) as raised:
        SafetyProfile.model_validate(
            {"require_sandbox": "no", "max_retries_per_step": 101, "extra": 1}
        )
    locs = {e["loc"][0] for e in raised.value.errors()}
    assert locs == {"require_sandbox", "max_retries_per_step", "extra"}


def test_json_validation_is_strict_too() -> None:
    assert SafetyProfile.model_validate_json('{"max_cost_per_plan": 5}').max_cost_per_plan == 5.0
    for bad in ('{"require_sandbox": "true"}', '{"max_retries_per_step": 3.5}',
                '{"max_cost_per_plan": -1}', '{"x": 1}'):
        with pytest.raises(ValidationError):
            SafetyProfile.model_validate_json(bad)


def test_profile_is_immutable() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_SAFETY_PROFILE.require_sandbox = False  # type: ignore[misc]
