"""Pre-model phrase screening, pure (seed 003 "Pre-model rejection")."""

from __future__ import annotations

import pytest

from app.policy.screening import (
    normalize_phrase,
    normalize_phrases,
    phrase_warnings,
    screen,
    screen_skills,
)

PHRASES = normalize_phrases(["delete all documents", "rm -rf", "Format Drive"])


@pytest.mark.parametrize("text, expected", [
    ("please RM -RF / now", "rm -rf"),
    ("Delete All Documents now", "delete all documents"),
    ("FORMAT DRIVE c:", "format drive"),
    ("convert the file format to flac", None),
    ("rm  -rf with two spaces is a different string", None),
    ("", None),
])
def test_screen_is_a_lowercase_substring_match(text, expected):
    assert screen(text, PHRASES) == expected


def test_first_phrase_in_stored_order_wins():
    assert screen("rm -rf and delete all documents", PHRASES) == "delete all documents"
    assert screen("rm -rf and delete all documents", ["rm -rf", "delete all documents"]) == (
        "rm -rf")


def test_normalisation_strips_lowercases_and_dedupes_in_order():
    assert normalize_phrases(["  RM -RF ", "rm -rf", "Drop Table", "drop table"]) == [
        "rm -rf", "drop table"]
    with pytest.raises(ValueError):
        normalize_phrase("   ")
    with pytest.raises(ValueError):
        normalize_phrase("x" * 201)
    assert normalize_phrase(" " + "x" * 200 + " ") == "x" * 200


def test_warnings_name_bare_words_and_short_phrases():
    warned = phrase_warnings(["format", "delete", "rm", "drop", "kill", "remove", "abc",
                              "format the system", "rm -rf", "mkfs.ext4", "/dev/sda"])
    named = [w.split("'")[1] for w in warned]
    assert named == ["format", "delete", "rm", "drop", "kill", "remove", "abc"]
    assert phrase_warnings(["delete all documents"]) == []


def test_screen_skills_reports_the_skill():
    skills = [("files", ["delete all documents"]), ("shell", ["rm -rf"])]
    assert screen_skills("sudo RM -RF /", skills) == ("shell", "rm -rf")
    assert screen_skills("hello", skills) is None
