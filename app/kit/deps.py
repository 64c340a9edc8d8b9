"""Dependencies: the app state and the session that owns the transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.auth.keys import Authenticator, KeyCache
from app.auth.ratelimit import RateLimiter
from app.authorize.service import Caller
from app.config import Settings
from app.decisions.log import DecisionLog
from app.kit.notify import Notifier
from app.kit.schemas import NAME_PATTERN, PROFILE_NAME_PATTERN
from app.plans.service import PlanCache
from app.registry.service import RegistryCache
from app.store.engine import WRITE_OPTION


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker
    plan_cache: PlanCache
    schema_head: str | None
    known_revisions: frozenset[str]
    registry: RegistryCache
    decision_log: DecisionLog | None
    authenticator: Authenticator
    key_cache: KeyCache
    rate_limiter: RateLimiter | None
    notifier: Notifier


async def get_state(request: Request) -> AppState:
    return request.app.state.toolgate


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """Commits when the route returns, rolls back when it raises: routes and repositories
    never commit themselves, so a rejected change leaves stored state as it was."""
    state: AppState = request.app.state.toolgate
    async with state.sessions() as session, session.begin():
        if request.method not in ("GET", "HEAD"):
            await session.connection(execution_options={WRITE_OPTION: True})
        yield session


async def get_caller(request: Request) -> Caller:
    return Caller(
        request_id=request.headers.get("x-request-id", "")[:200] or None,
        key_id=getattr(request.state, "key_id", None),
    )


State = Annotated[AppState, Depends(get_state)]
Session = Annotated[AsyncSession, Depends(get_session, scope="function")]
CallerDep = Annotated[Caller, Depends(get_caller)]
ProfileNameParam = Annotated[str, Path(pattern=PROFILE_NAME_PATTERN)]
NameParam = Annotated[str, Path(pattern=NAME_PATTERN)]
