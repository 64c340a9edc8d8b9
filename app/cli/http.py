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
    if url.rstrip("/").endswith("/v1"):  # every path here starts with /v1 already
        raise fail(f"--url {url} ends in /v1: give the service's own address, "
                   f"{url.rstrip('/')[:-3] or DEFAULT_URL} (toolgate adds the /v1/... paths)")
    headers = dict(kwargs.pop("headers", None) or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = url.rstrip("/") + path
    try:
        response = httpx.request(method, target, headers=headers, timeout=timeout, **kwargs)
    except httpx.HTTPError as exc:
        raise fail(f"cannot reach {url}: {exc}") from None
    if response.is_success:
        if response.status_code == 204:
            return None
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


def post_items(url: str, path: str, file: str, *, token: str | None, key: str) -> Any:
    """POST a file of items (a JSON list, {key: [...]}, or JSONL) and return the answer."""
    import orjson

    try:
        with open(file, "rb") as handle:
            content = handle.read()
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror}") from None
    try:
        data = orjson.loads(content)
        is_json = isinstance(data, list) or (isinstance(data, dict) and key in data)
    except orjson.JSONDecodeError:
        is_json = False
    kind = "application/json" if is_json else "application/x-ndjson"
    return call("POST", url, path, token=token, content=content,
                headers={"Content-Type": kind})
