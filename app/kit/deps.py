"""Dependencies every feature uses: the settings, the database session that owns the
transaction, who is calling, and path parameters' patterns. Each feature keeps its own
aliases for its own state (app/<feature>/deps.py); main.py's lifespan puts each on
`app.state` under its own name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.kit.caller import Caller, client_request_id
from app.kit.schemas import NAME_PATTERN, PROFILE_NAME_PATTERN
from app.store.engine import WRITE_OPTION


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_sessions(request: Request) -> async_sessionmaker[AsyncSession]:
    return request.app.state.sessions


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """Commits when the route returns, rolls back when it raises: routes and repositories
    never commit themselves, so a rejected change leaves stored state as it was."""
    async with request.app.state.sessions() as session, session.begin():
        if request.method not in ("GET", "HEAD"):
            await session.connection(execution_options={WRITE_OPTION: True})
        yield session


async def get_caller(request: Request) -> Caller:
    return Caller(
        request_id=client_request_id(request.headers.get("x-request-id")),
        key_id=getattr(request.state, "key_id", None),
    )


SettingsDep = Annotated[Settings, Depends(get_settings)]
Sessions = Annotated[async_sessionmaker[AsyncSession], Depends(get_sessions)]
Session = Annotated[AsyncSession, Depends(get_session, scope="function")]
CallerDep = Annotated[Caller, Depends(get_caller)]
ProfileNameParam = Annotated[str, Path(pattern=PROFILE_NAME_PATTERN)]
NameParam = Annotated[str, Path(pattern=NAME_PATTERN)]
