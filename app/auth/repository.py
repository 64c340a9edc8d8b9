"""Stored API keys. Callers own the transaction (the request's session, or the bootstrap)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.tables import ApiKey
from app.store.base import utcnow
from app.store.engine import get_locked

# LISTEN/NOTIFY channel: a message means "a key changed, drop cached keys" (app/kit/notify.py):
# its payload is a revoked key's id, or CREATED + the id of a new key (whose hash may be
# remembered as unknown: KeyCache.notified).
KEYS_CHANNEL = "toolgate_keys"
CREATED = "created:"


async def get_by_hash(session: AsyncSession, key_hash: str) -> ApiKey | None:
    return await session.scalar(select(ApiKey).where(ApiKey.key_hash == key_hash))


async def get(session: AsyncSession, key_id: str) -> ApiKey | None:
    return await session.get(ApiKey, key_id)


async def by_ids(session: AsyncSession, key_ids: list[str]) -> list[ApiKey]:
    """The keys of these ids that exist (revoked ones too): who a record's key id was."""
    return list((await session.scalars(select(ApiKey).where(ApiKey.id.in_(key_ids)))).all())


async def lock(session: AsyncSession, key_id: str) -> ApiKey | None:
    """The key as it is now, locked until the transaction ends (what a revocation starts
    from: two revocations at once then record one change, not two)."""
    return await get_locked(session, ApiKey, key_id)


async def list_keys(session: AsyncSession) -> list[ApiKey]:
    return list((await session.scalars(select(ApiKey).order_by(ApiKey.created_at,
                                                                ApiKey.id))).all())


async def insert(session: AsyncSession, key: ApiKey) -> None:
    """Insert, and on PostgreSQL tell every listening process at commit (as `revoke`)."""
    session.add(key)
    await session.flush()
    await _notify(session, CREATED + key.id)


async def revoke(session: AsyncSession, key: ApiKey, *, by: str | None) -> None:
    """Revoke, and on PostgreSQL tell every listening process in the same transaction:
    NOTIFY is delivered at commit, so nobody hears of a revocation that rolled back."""
    key.revoked_at, key.revoked_by = utcnow(), by
    await session.flush()
    await _notify(session, key.id)


async def _notify(session: AsyncSession, payload: str) -> None:
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_notify(:channel, :payload)"),
                              {"channel": KEYS_CHANNEL, "payload": payload})


async def count_usable_admins(session: AsyncSession, now: datetime) -> int:
    query = select(func.count()).select_from(ApiKey).where(
        ApiKey.role == "admin", ApiKey.revoked_at.is_(None),
        (ApiKey.expires_at.is_(None)) | (ApiKey.expires_at > now),
    )
    return int(await session.scalar(query) or 0)
