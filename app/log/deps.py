"""The decision log's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.log.decision_log import DecisionLog


def get_decision_log(request: Request) -> DecisionLog | None:
    """The worker's decision log; None when TOOLGATE_DECISION_LOG_ENABLED is false."""
    return request.app.state.decision_log


DecisionLogDep = Annotated[DecisionLog | None, Depends(get_decision_log)]
