"""The replay feature's dependency aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.replay.service import Replayer


def get_replayer(request: Request) -> Replayer:
    return request.app.state.replayer


ReplayerDep = Annotated[Replayer, Depends(get_replayer)]
