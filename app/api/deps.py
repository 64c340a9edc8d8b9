"""Dependencies: the app state and the session that owns the transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.api.schemas import NAME_PATTERN, PROFILE_NAME_PATTERN
from app.config import Settings
from app.plans import PlanCache


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker
    plan_cache: PlanCache
    schema_head: str | None


def get_state(request: Request) -> AppState:
    return request.app.state.toolgate


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """Commits when the route returns, rolls back when it raises: routes and repositories
    never commit themselves, so a rejected change leaves stored state as it was."""
    state: AppState = request.app.state.toolgate
    async with state.sessions() as session, session.begin():
        yield session


State = Annotated[AppState, Depends(get_state)]
Session = Annotated[AsyncSession, Depends(get_session)]
ProfileNameParam = Annotated[str, Path(pattern=PROFILE_NAME_PATTERN)]
NameParam = Annotated[str, Path(pattern=NAME_PATTERN)]
