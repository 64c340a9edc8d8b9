"""The rules feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.rules.service import RuleBook


def get_rules(request: Request) -> RuleBook:
    return request.app.state.rules


RulesDep = Annotated[RuleBook, Depends(get_rules)]
