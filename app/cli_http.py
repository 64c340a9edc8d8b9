"""HTTP helpers for CLI verbs that act on a running service (SPEC §1): `--url`/`--token`,
one request, and errors turned into a plain message and exit code 2."""

from __future__ import annotations

from typing import Any

import httpx
import typer

DEFAULT_URL = "http://127.0.0.1:8000"
UNAVAILABLE = 2  # the service could not be reached, or answered with an error


def fail(message: str) -> typer.Exit:
    typer.echo(f"toolgate: {message}", err=True)
    return typer.Exit(UNAVAILABLE)


def call(method: str, url: str, path: str, *, token: str | None = None,
         timeout: float = 30.0, **kwargs: Any) -> Any:
    """One request; returns the decoded JSON answer of a 2xx, else raises typer.Exit(2)
    after printing the service's error envelope (or why it could not be reached)."""
    headers = dict(kwargs.pop("headers", None) or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = url.rstrip("/") + path
    try:
        response = httpx.request(method, target, headers=headers, timeout=timeout, **kwargs)
    except httpx.HTTPError as exc:
        raise fail(f"cannot reach {url}: {exc}") from None
    if response.is_success:
        try:
            return response.json()
        except ValueError:
            raise fail(f"{method} {path}: the answer is not JSON") from None
    try:
        error = response.json()["error"]
        detail = f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        detail = response.text[:500]
    raise fail(f"{method} {path} answered {response.status_code} ({detail})")
