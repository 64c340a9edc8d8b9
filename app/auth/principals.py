"""The normal form of a principal (SPEC §17): NFKC, case-folded, NFKC again (Unicode's
NFKC_Casefold as near as the standard library gets), so `BOT-x`, `bot-X` and `ｂｏｔ-ｘ` are
one principal. Keys store it so; comparisons normalise both sides as well, so that rows
stored before the rule (keys, pending approvals) compare the same way without a migration."""

from __future__ import annotations

import unicodedata


def normal(name: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and normal(a) == normal(b)
