"""Pre-model phrase screening (seed 003 "Pre-model rejection"): pure, deterministic.

A request is rejected before any model runs when its text contains one of a skill's unsafe
phrases as a substring, both normalised the same way (SPEC §5): Unicode NFKC, format
characters (Cf) removed, then case-folded, then every run of whitespace made one space and
the ends stripped. So
`"RM \t -RF"`, `"rm  -rf"` and `"ｒｍ -ｒｆ"` all contain `rm -rf`: a double space or a tab
must not walk past the screen. Phrases are tried in the stored order; the first match wins,
which makes the reported phrase deterministic too.

Phrases are stored normalised. Phrases stored before this normalisation (only stripped and
lowercased) are normalised again when a text is screened: `normalized_phrases` caches that
per phrase list, so no data migration is needed and the common case costs a lookup.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

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


def normalize_text(text: str) -> str:
    """SPEC §5 and §17: NFKC, format characters (Unicode category Cf: zero-width spaces and
    joiners, soft hyphens, bidirectional marks) removed, case-folded, whitespace runs made
    one space, the ends stripped. `r\u200bm -rf` must not walk past `rm -rf`."""
    if not text.isascii():  # ASCII is its own NFKC form and holds no format character
        text = unicodedata.normalize("NFKC", text)
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(text.casefold().split())


def normalize_phrase(phrase: str) -> str:
    """The phrase as stored and matched (normalize_text); raises ValueError for a phrase
    that is empty or longer than MAX_PHRASE_CHARS once normalised."""
    normal = normalize_text(phrase)
    if not normal:
        raise ValueError("a phrase must contain something other than whitespace")
    if len(normal) > MAX_PHRASE_CHARS:
        raise ValueError(f"a phrase is at most {MAX_PHRASE_CHARS} characters")
    return normal


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


# Phrase lists seen recently, each with its normalised form. Bounded by count; a list is at
# most 1,000 phrases of 200 characters (app/registry/schemas.py), and a normalised phrase
# that did not change is the stored string itself, so an entry costs about its key.
PHRASE_LISTS_CACHED = 64


@lru_cache(maxsize=PHRASE_LISTS_CACHED)
def _normalized(phrases: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for phrase in phrases:
        normal = normalize_text(phrase)
        # An empty phrase would match every text; the old normalisation could not store one
        # and the new one refuses it, so one that is empty here is skipped, not matched.
        if normal:
            out.append(phrase if normal == phrase else normal)
    return tuple(out)


def normalized_phrases(phrases: Sequence[str]) -> tuple[str, ...]:
    """`phrases` as screening matches them: each normalised (normalize_text), in order.
    Stored phrases already are, unless stored before SPEC §5's normalisation."""
    return _normalized(tuple(phrases))


def screen(text: str, phrases: Sequence[str]) -> str | None:
    """The first phrase contained in `text`, both normalised (normalize_text)."""
    normal = normalize_text(text)
    for phrase in normalized_phrases(phrases):
        if phrase in normal:
            return phrase
    return None


def screen_skills(
    text: str, skills: Iterable[tuple[str, Sequence[str]]]
) -> tuple[str, str] | None:
    """Screen against several skills in the given order: (skill, phrase) of the first match."""
    normal = normalize_text(text)
    for skill, phrases in skills:
        for phrase in normalized_phrases(phrases):
            if phrase in normal:
                return skill, phrase
    return None


def screen_deny(skill: str, phrase: str) -> Deny:
    """The rejection of a text that contains `phrase`, one of `skill`'s unsafe phrases."""
    return deny("unsafe_phrase", f"Request rejected before any model ran: it contains the "
                f"unsafe phrase '{phrase}' of skill '{skill}'", skill=skill, matched_phrase=phrase)
