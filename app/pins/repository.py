"""Queries of pins. Functions never commit; the session dependency does.

A change starts from `lock_pin()`: a lock on the (server, tool) key first (a row that does
not exist yet cannot be locked FOR UPDATE, and two gateways may see a new tool at once),
then the row as it is under it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.pins.tables import GatewayPin
from app.store.base import utcnow
from app.store.engine import get_locked, lock_key


async def get_pin(session: AsyncSession, server: str, tool: str) -> GatewayPin | None:
    return await session.get(GatewayPin, (server, tool))


async def lock_pin(session: AsyncSession, server: str, tool: str) -> GatewayPin | None:
    await lock_key(session, f"gateway-pin:{server}/{tool}")
    return await get_locked(session, GatewayPin, (server, tool))


async def list_pins(session: AsyncSession, server: str | None = None) -> list[GatewayPin]:
    query = select(GatewayPin).order_by(GatewayPin.server, GatewayPin.tool)
    if server is not None:
        query = query.where(GatewayPin.server == server)
    return list((await session.scalars(query)).all())


async def new_pin(session: AsyncSession, server: str, tool: str) -> GatewayPin:
    now = utcnow()
    row = GatewayPin(server=server, tool=tool, digest=None, definition=None, pinned_by=None,
                     seen_digest=None, seen_definition=None, seen_at=None, created_at=now,
                     updated_at=now)
    session.add(row)
    return row


async def save(session: AsyncSession, row: GatewayPin) -> None:
    row.updated_at = utcnow()
    await session.flush()


async def delete_pin(session: AsyncSession, row: GatewayPin) -> None:
    await session.delete(row)
    await session.flush()
