"""The knaif project's real utterances and paths through the core (tests/peercases.py):
every must-reject utterance rejected by its skill's phrases, every must-pass one passing,
every path case answered as expected."""

from __future__ import annotations

import pytest

from app.policy.paths import find_escape
from app.policy.screening import normalize_phrases, screen
from tests import peercases

UTTERANCES = peercases.utterances()


def test_the_data_is_what_the_tests_expect() -> None:
    data = peercases.knaif()
    assert len(data["must_reject"]) == 16 and len(data["must_not_reject"]) == 639
    assert len(data["path_cases"]) == 41 and len(data["matcher_cases"]) == 19
    texts = {(skill, text) for skill, text, _, _ in UTTERANCES}
    assert peercases.SCREEN_CANNOT_REJECT | peercases.PHRASE_LIST_REJECTS <= texts


def test_every_utterance_is_screened_as_it_must_be() -> None:
    wrong = []
    for skill, text, rejected, phrase in UTTERANCES:
        got = screen(text, normalize_phrases(peercases.phrases(skill)))
        if (got is not None) != rejected or (rejected and got != phrase):
            wrong.append(f"{skill}: {text!r} -> {got!r}, wanted "
                         f"{phrase if rejected else 'no match'!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("phrases", "text", "rejected"), peercases.matcher_cases())
def test_matcher_cases(phrases: list[str], text: str, rejected: bool) -> None:
    assert (screen(text, normalize_phrases(phrases)) is not None) == rejected


@pytest.mark.parametrize("case", peercases.knaif()["path_cases"],
                         ids=[c["name"] for c in peercases.knaif()["path_cases"]])
def test_path_cases(case: dict) -> None:
    escape = find_escape({case["arg"]: case["value"]},
                         peercases.path_args(case["skill"], case["tool"]),
                         root=case["sandbox_root"], variables=case["variables"])
    assert (escape is None) == (case["expect"] == "allow"), escape
    if escape is not None:
        assert escape[0] == case["arg"]
