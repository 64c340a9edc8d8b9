"""The authorize feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.authorize.service import Authorizer


def get_authorizer(request: Request) -> Authorizer:
    return request.app.state.authorizer


AuthorizerDep = Annotated[Authorizer, Depends(get_authorizer)]
