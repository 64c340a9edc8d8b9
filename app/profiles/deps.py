"""The profiles feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.profiles.service import ProfileService


def get_profiles(request: Request) -> ProfileService:
    return request.app.state.profiles


ProfilesDep = Annotated[ProfileService, Depends(get_profiles)]
