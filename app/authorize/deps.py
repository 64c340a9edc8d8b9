"""The authorize feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.authorize.pipeline import Pipeline
from app.authorize.service import Authorizer


def get_authorizer(request: Request) -> Authorizer:
    return request.app.state.authorizer


def get_pipeline(request: Request) -> Pipeline:
    return request.app.state.pipeline


AuthorizerDep = Annotated[Authorizer, Depends(get_authorizer)]
PipelineDep = Annotated[Pipeline, Depends(get_pipeline)]
