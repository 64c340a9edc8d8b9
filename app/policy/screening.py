"""Pre-model phrase screening (seed 003 "Pre-model rejection"): pure, deterministic.

A request is rejected before any model runs when its text, lowercased, contains one of a
skill's unsafe phrases as a substring. Phrases are stored stripped and lowercased, so the
match is `phrase in text.lower()`, tried in the stored order; the first match wins, which
makes the reported phrase deterministic too. Nothing else is normalised (whitespace inside
a phrase or a text is compared as it is): the seed's rule is a plain substring match and a
reader must be able to predict it by eye.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.policy.checks import deny
from app.policy.model import Deny

MAX_PHRASE_CHARS = 200
MIN_SPECIFIC_CHARS = 4

# Bare verbs an operator is tempted to list; each alone matches countless legitimate requests
# (the seed: "a bare 'format' would reject every legitimate request to change a file format").
COMMON_WORDS = frozenset({
    "format", "delete", "remove", "rm", "drop", "kill", "erase", "wipe", "destroy", "purge",
    "truncate", "reset", "shutdown", "reboot", "overwrite", "clear", "clean", "uninstall",
    "sudo", "chmod", "chown", "mv", "dd", "exec", "run", "all", "files", "disk", "drive",
})


def normalize_phrase(phrase: str) -> str:
    """Stripped and lowercased; raises ValueError for an empty or overlong phrase."""
    stripped = phrase.strip()
    if not stripped:
        raise ValueError("a phrase must contain something other than whitespace")
    if len(stripped) > MAX_PHRASE_CHARS:
        raise ValueError(f"a phrase is at most {MAX_PHRASE_CHARS} characters")
    return stripped.lower()


def normalize_phrases(phrases: Iterable[str]) -> list[str]:
    """Each phrase normalised, duplicates removed, first occurrence's order kept."""
    return list(dict.fromkeys(normalize_phrase(p) for p in phrases))


def phrase_warnings(phrases: Iterable[str]) -> list[str]:
    """Advice for phrases that will reject legitimate requests: a string so short it occurs
    inside ordinary words ("rm" is in "confirm" and "format"), or a bare word (no space,
    letters only, or a known common verb). Tokens such as "mkfs.ext4" or "/dev/sda" are
    specific enough and get no warning."""
    warnings = []
    for phrase in phrases:
        if len(phrase) < MIN_SPECIFIC_CHARS:
            warnings.append(
                f"'{phrase}' is shorter than {MIN_SPECIFIC_CHARS} characters: as a substring "
                "it occurs inside ordinary words; use a specific phrase"
            )
        elif phrase in COMMON_WORDS or phrase.isalpha():
            common = "a common word" if phrase in COMMON_WORDS else "a single word"
            warnings.append(
                f"'{phrase}' is {common}: it rejects every request that merely mentions it; "
                "prefer a specific phrase (e.g. 'format the system', not 'format')"
            )
    return warnings


def screen(text: str, phrases: Sequence[str]) -> str | None:
    """The first phrase (already normalised) contained in `text`, case-insensitively."""
    lowered = text.lower()
    for phrase in phrases:
        if phrase in lowered:
            return phrase
    return None


def screen_skills(
    text: str, skills: Iterable[tuple[str, Sequence[str]]]
) -> tuple[str, str] | None:
    """Screen against several skills in the given order: (skill, phrase) of the first match."""
    lowered = text.lower()
    for skill, phrases in skills:
        for phrase in phrases:
            if phrase in lowered:
                return skill, phrase
    return None


def screen_deny(skill: str, phrase: str) -> Deny:
    """The rejection of a text that contains `phrase`, one of `skill`'s unsafe phrases."""
    return deny("unsafe_phrase", f"Request rejected before any model ran: it contains the "
                f"unsafe phrase '{phrase}' of skill '{skill}'", skill=skill, matched_phrase=phrase)
