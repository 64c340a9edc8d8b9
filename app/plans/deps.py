"""The plans feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.plans.service import PlanCache


def get_plan_cache(request: Request) -> PlanCache:
    return request.app.state.plans


PlanCacheDep = Annotated[PlanCache, Depends(get_plan_cache)]
