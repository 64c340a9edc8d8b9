"""Webhooks (SPEC §10): PUT/GET/DELETE /v1/webhooks/{name}, and each one's deliveries."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.edge.errors import InvalidInput, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, NameParam, Session, Sessions, SettingsDep
from app.log.audit import audit_change
from app.store.base import utcnow
from app.store.engine import WRITE_OPTION, get_locked
from app.webhooks import guard
from app.webhooks.schemas import DeliveryList, WebhookIn, WebhookList, WebhookOut
from app.webhooks.service import delivery_out, shown_url, start_cursor, webhook_out
from app.webhooks.tables import Webhook, WebhookDelivery

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["webhooks"])


def not_found(name: str) -> NotFound:
    return NotFound(f"webhook '{name}' does not exist", name=name)


def _config(row: Webhook) -> dict:
    """What the audit record shows of a webhook: never its secret, nor URL credentials."""
    return {"url": shown_url(row.url), "events": row.events, "projects": row.projects}


@router.get("/webhooks", response_model=WebhookList, summary="Every webhook (no secrets)")
async def list_webhooks(session: Session) -> dict:
    rows = (await session.execute(select(Webhook).order_by(Webhook.name))).scalars()
    return {"items": [webhook_out(row) for row in rows]}


@router.put("/webhooks/{name}", response_model=WebhookOut,
            responses={201: {"model": WebhookOut, "description": "Created"}},
            summary="Create or replace a webhook")
async def put_webhook(name: NameParam, body: WebhookIn, sessions: Sessions,
                      caller: CallerDep, response: Response, settings: SettingsDep) -> dict:
    """Events from now on are delivered to `url`, signed with `secret` (write-only: never
    in a GET, an export or an audit record). A URL with user info, or whose host is or
    resolves to an address inside (loopback, private, link-local, unspecified, multicast,
    cloud metadata) is 422 unless TOOLGATE_WEBHOOK_ALLOW_HOSTS allows it."""
    if len(name) > 64:
        raise InvalidInput("name is too long", fields=[
            {"field": "name", "message": "at most 64 characters", "type": "string_too_long"}])
    try:
        await guard.check_url(body.url, guard.AllowList.parse(settings.webhook_allow_hosts),
                              must_resolve=False)
    except guard.Refused as refused:
        raise InvalidInput(f"url: {refused}", fields=[
            {"field": "url", "message": str(refused), "type": "url_not_allowed"}]) from None
    # The write transaction begins only now, after the resolution (up to
    # guard.RESOLVE_SECONDS): on SQLite it holds the database's write lock, which the
    # decision log's writer and every other change wait for (the `Session` dependency
    # would have taken it before the route ran).
    async with sessions() as session, session.begin():
        await session.connection(execution_options={WRITE_OPTION: True})
        return await _put(session, name, body, caller, response)


async def _put(session: AsyncSession, name: str, body: WebhookIn, caller: CallerDep,
               response: Response) -> dict:
    row = await get_locked(session, Webhook, name)
    before = _config(row) if row else None
    now = utcnow()
    if row is None:
        row = Webhook(name=name, url=body.url, events=body.events, projects=body.projects,
                      secret=body.secret, created_at=now, updated_at=now)
        session.add(row)
        response.status_code = 201
        await start_cursor(session)
    else:
        row.url, row.events, row.projects = body.url, body.events, body.projects
        row.secret, row.updated_at = body.secret, now
    await session.flush()
    await audit_change(session, caller, resource="webhook", name=name,
                       operation="create" if before is None else "update",
                       before=before, after=_config(row))
    return webhook_out(row)


@router.get("/webhooks/{name}", response_model=WebhookOut, responses=errors(404),
            summary="One webhook (no secret)")
async def get_webhook(name: NameParam, session: Session) -> dict:
    row = await session.get(Webhook, name)
    if row is None:
        raise not_found(name)
    return webhook_out(row)


@router.delete("/webhooks/{name}", status_code=204, responses=errors(404),
               summary="Delete a webhook; its pending deliveries are dropped")
async def delete_webhook(name: NameParam, session: Session, caller: CallerDep) -> Response:
    row = await get_locked(session, Webhook, name)
    if row is None:
        raise not_found(name)
    before = _config(row)
    await session.delete(row)
    await session.execute(delete(WebhookDelivery).where(WebhookDelivery.webhook == name,
                                                        WebhookDelivery.state == "pending"))
    await audit_change(session, caller, resource="webhook", name=name, operation="delete",
                       before=before, after=None)
    return Response(status_code=204)


@router.get("/webhooks/{name}/deliveries", response_model=DeliveryList,
            responses=errors(404), summary="A webhook's deliveries, newest first")
async def list_deliveries(
    name: NameParam,
    session: Session,
    state: Annotated[str | None, Query(pattern="^(pending|delivered|failed)$")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> dict:
    """Each delivery with its attempts' status and duration (never a body)."""
    if await session.get(Webhook, name) is None:
        raise not_found(name)
    query = select(WebhookDelivery).where(WebhookDelivery.webhook == name)
    if state is not None:
        query = query.where(WebhookDelivery.state == state)
    if cursor is not None:
        query = query.where(WebhookDelivery.id < cursor)
    rows = list((await session.execute(
        query.order_by(WebhookDelivery.id.desc()).limit(limit + 1))).scalars())
    items = [delivery_out(row) for row in rows[:limit]]
    return {"items": items,
            "next_cursor": str(rows[limit - 1].id) if len(rows) > limit else None}
