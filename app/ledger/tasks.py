"""The ledger's periodic work: charge lapsed cost holds as spent (SPEC §11)."""

from __future__ import annotations

from app.kit.scheduler import Job
from app.ledger.service import Ledger


def jobs(ledger: Ledger, *, interval: float) -> list[Job]:
    return [Job("ledger.sweep", ledger.sweep, interval)]
