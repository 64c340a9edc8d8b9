"""Pre-model phrase screening, pure (seed 003 "Pre-model rejection")."""

from __future__ import annotations

import pytest

from app.policy.screening import (
    normalize_phrase,
    normalize_phrases,
    normalize_text,
    normalized_phrases,
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
    ("", None),
])
def test_screen_is_a_substring_match_ignoring_case(text, expected):
    assert screen(text, PHRASES) == expected


# SPEC §5 (issue 22): whitespace runs, NFKC and case folding no longer walk past the screen.
@pytest.mark.parametrize("text", [
    "rm  -rf /", "rm\t-rf /", "rm \t -rf", "RM \t -RF", "rm\n-rf", "rm\r\n-rf",
    "rm\u00a0-rf", "rm\u3000-rf", "rm\u2003\u2003-rf", "rm\x0b-rf", "rm\x1f-rf",
    "ｒｍ －ｒｆ", "ＲＭ -ＲＦ", "please\trun rm   -rf\tnow",
])
def test_whitespace_width_and_case_variants_are_caught(text):
    assert screen(text, PHRASES) == "rm -rf"
    assert screen_skills(text, [("shell", PHRASES)]) == ("shell", "rm -rf")


@pytest.mark.parametrize(("raw", "normal"), [
    ("  RM \t -RF ", "rm -rf"),
    ("Format\u00a0\u00a0Drive", "format drive"),
    ("ＦＯＲＭＡＴ　ＤＲＩＶＥ", "format drive"),  # full-width letters, ideographic space
    ("Straße", "strasse"),  # case folding, not just lowercasing
    ("ﬁle", "file"),  # NFKC: the ligature
    ("delete\nall\r\ndocuments", "delete all documents"),
])
def test_normalisation_is_nfkc_casefold_and_whitespace_runs(raw, normal):
    assert normalize_text(raw) == normal
    assert normalize_phrase(raw) == normal
    assert screen(f"x {raw} y", [normal]) == normal
    assert screen(f"x {normal} y", normalize_phrases([raw])) == normal


def test_phrases_stored_before_spec_5_are_normalised_when_matching():
    """Rows written with the old rule (stripped and lowercased only) match as if stored
    today: no data migration needed."""
    old_rows = ["rm  -rf", "format\tdrive", "ｗｉｐｅ ａｌｌ", "STRAẞE"]
    assert screen("sudo rm -rf /", old_rows) == "rm -rf"
    assert screen("FORMAT  DRIVE c:", old_rows) == "format drive"
    assert screen("wipe all", old_rows) == "wipe all"
    assert screen("die strasse", old_rows) == "strasse"
    assert screen_skills("rm \t-rf", [("old", old_rows)]) == ("old", "rm -rf")
    # A row that would be empty now is skipped rather than matching every text.
    assert screen("anything", ["\x1c"]) is None


def test_normalised_phrase_lists_are_cached_and_reuse_the_stored_strings():
    stored = ["rm -rf", "format drive"]
    first = normalized_phrases(stored)
    assert first == ("rm -rf", "format drive")
    assert normalized_phrases(list(stored)) is first  # one normalisation per list
    assert all(a is b for a, b in zip(first, stored, strict=True))  # unchanged: same string
    assert normalized_phrases(["RM  -RF"]) == ("rm -rf",)


def test_normalisation_limits_apply_to_the_normalised_phrase():
    with pytest.raises(ValueError):
        normalize_phrase(" \t\u3000 ")
    with pytest.raises(ValueError):
        normalize_phrase("ﷺ" * 12)  # one character, 18 once NFKC-normalised
    assert normalize_phrase("a  " * 100) == " ".join(["a"] * 100)


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


# SPEC §17 (issue 30): format characters (Unicode Cf) are removed before matching.
@pytest.mark.parametrize("text", [
    "r\u200bm -rf", "rm\u200c -rf", "rm -\u200drf", "\ufeffrm -rf", "r\u00adm -rf",
    "rm\u2060 -rf", "r\u202em -rf", "rm -r\u200ef", "ｒ\u200bｍ -rf",
])
def test_format_characters_do_not_walk_past_the_screen(text):
    assert screen(text, PHRASES) == "rm -rf"
    assert normalize_text(text) == "rm -rf"


def test_a_phrase_with_a_format_character_is_stored_without_it():
    assert normalize_phrase("rm\u200b -rf") == "rm -rf"
