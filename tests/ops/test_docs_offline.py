"""/docs and /redoc work offline (SPEC §13): their pages load nothing from elsewhere, and
every file they load is served by toolgate from the package."""

from __future__ import annotations

import re

import httpx
import pytest

URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*["']([^"']+)["']""")
TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_pages_load_only_our_own_files(client: httpx.AsyncClient, page: str) -> None:
    client.headers.pop("Authorization")  # the docs need no key
    r = await client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert not re.search(r"https?://", r.text), "the page names an external URL"
    loaded = {a or b for a, b in URL.findall(r.text)}
    assets = {u for u in loaded if u.startswith("/docs/assets/")}
    assert assets, loaded
    assert all(u.startswith("/") and not u.startswith("//") for u in loaded), loaded
    for url in assets:
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(TYPES[url[url.rfind("."):]]), url
        assert len(asset.content) > 500
    spec = await client.get("/openapi.json")
    assert spec.status_code == 200 and spec.json()["info"]["title"] == "toolgate"


async def test_only_the_vendored_assets_are_served(client: httpx.AsyncClient) -> None:
    for name in ("../routes.py", "VENDORED.md", "redoc.standalone.js.map", "%2e%2e%2fmain.py"):
        r = await client.get(f"/docs/assets/{name}")
        assert r.status_code == 404, name
        assert r.json()["error"]["code"] == "not_found"
