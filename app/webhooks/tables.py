"""Webhooks and their outbox. The outbox is fed from the hash-chained log itself: a cursor
(the last log `seq` turned into deliveries) advances in the same transaction as the
deliveries it creates, so an event is queued exactly when its record is durable and never
lost by a crash between the two."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.store.base import Base, Json, UTCDateTime

DUE = text("state = 'pending'")


class Webhook(Base):
    __tablename__ = "webhooks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2000))
    events: Mapped[list[str]] = mapped_column(Json)
    projects: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    secret: Mapped[str] = mapped_column(String(500))  # write-only on the API
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                    primary_key=True, autoincrement=True)
    webhook: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str] = mapped_column(String(36))  # the log record's decision_id
    event: Mapped[str] = mapped_column(String(32))
    body: Mapped[str] = mapped_column(Text)  # the exact bytes signed and sent
    # pending | delivered | failed (gave up after the last attempt)
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # When the next attempt is due; a claimed delivery's lease end while it is tried.
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(200))
    # Each attempt's {"at", "status", "duration_ms", "error"?} (the last 20); no bodies.
    history: Mapped[list[dict[str, Any]]] = mapped_column(Json, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        UniqueConstraint("webhook", "event_id", name="uq_webhook_deliveries_event"),
        Index("ix_webhook_deliveries_webhook_id", "webhook", "id"),
        Index("ix_webhook_deliveries_due", "next_attempt_at",
              postgresql_where=DUE, sqlite_where=DUE),
    )


class WebhookCursor(Base):
    """One row (id=1): the last log seq turned into deliveries."""

    __tablename__ = "webhook_cursor"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
