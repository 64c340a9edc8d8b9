"""The registry feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.registry.service import RegistryCache


def get_registry(request: Request) -> RegistryCache:
    return request.app.state.registry


RegistryDep = Annotated[RegistryCache, Depends(get_registry)]
