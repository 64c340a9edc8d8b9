"""The approvals' periodic work: expire lapsed approvals (SPEC §10)."""

from __future__ import annotations

from app.approvals.service import ApprovalService
from app.kit.scheduler import Job


def jobs(approvals: ApprovalService, *, interval: float) -> list[Job]:
    return [Job("approvals.sweep", approvals.sweep, interval)]
