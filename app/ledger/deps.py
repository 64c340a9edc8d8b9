"""The ledger feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.ledger.service import Ledger


def get_ledger(request: Request) -> Ledger:
    return request.app.state.ledger


LedgerDep = Annotated[Ledger, Depends(get_ledger)]
