"""The approvals feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.approvals.service import ApprovalService


def get_approvals(request: Request) -> ApprovalService:
    return request.app.state.approvals


ApprovalsDep = Annotated[ApprovalService, Depends(get_approvals)]
