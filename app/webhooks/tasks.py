"""The webhooks' periodic work: turn new log records into deliveries and send the due ones,
a thin call into app/webhooks/service.py's delivery."""

from __future__ import annotations

from app.kit.scheduler import Job
from app.webhooks.service import Webhooks


async def deliver(webhooks: Webhooks) -> None:
    await webhooks.enqueue()
    while await webhooks.deliver_due():
        pass


def jobs(webhooks: Webhooks, *, interval: float) -> list[Job]:
    return [Job("webhooks.deliver", lambda: deliver(webhooks), interval)]
