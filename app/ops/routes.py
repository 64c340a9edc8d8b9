"""GET /metrics (Prometheus text format), and the API docs served from package files:
/docs (Swagger UI), /redoc, their assets under /docs/assets/ (app/ops/static/VENDORED.md).
None needs an API key; /metrics needs TOOLGATE_METRICS_TOKEN when that is set."""

from __future__ import annotations

import hmac
from functools import lru_cache
from importlib.resources import files

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse

from app.edge.errors import NotFound, Unauthorized
from app.edge.openapi import errors

router = APIRouter(tags=["operations"])

ASSETS = "/docs/assets"
# name -> (file under app/ops/static, media type): only these are served.
_ASSETS = {
    "swagger-ui-bundle.js": ("swagger-ui/swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": ("swagger-ui/swagger-ui.css", "text/css"),
    "favicon-32x32.png": ("swagger-ui/favicon-32x32.png", "image/png"),
    "redoc.standalone.js": ("redoc/redoc.standalone.js", "text/javascript"),
}


# With TOOLGATE_METRICS_TOKEN set, main.py includes this router with these responses.
TOKEN_ERRORS = errors(401, s401="TOOLGATE_METRICS_TOKEN is set and the request does not "
                      "bear it")


@router.get("/metrics", response_class=Response, responses={
    200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    summary="Metrics in Prometheus text format")
async def get_metrics(request: Request) -> Response:
    """Every worker's counts in one scrape (docs/operations.md lists the metrics). Open
    without a key unless TOOLGATE_METRICS_TOKEN is set; then only `Authorization: Bearer
    <that token>` reads it (an API key does not)."""
    state = request.app.state
    token = state.settings.metrics_token
    if token:
        sent = request.headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            raise Unauthorized("GET /metrics needs 'Authorization: Bearer "
                               "<TOOLGATE_METRICS_TOKEN>'")
    if state.metrics is None:
        raise NotFound("metrics are off (TOOLGATE_METRICS_ENABLED=false)")
    body, content_type = await state.metrics.scrape()
    return Response(body, media_type=content_type)


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json", title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url="/docs/oauth2-redirect",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        swagger_ui_parameters={"validatorUrl": None})


@router.get("/docs/oauth2-redirect", include_in_schema=False)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title=f"{request.app.title} - ReDoc",
                          redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                          redoc_favicon_url=f"{ASSETS}/favicon-32x32.png",
                          with_google_fonts=False)


@router.get(ASSETS + "/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    found = _ASSETS.get(name)
    if found is None:
        raise NotFound(f"no asset {name!r}")
    return Response(_read(found[0]), media_type=found[1],
                    headers={"Cache-Control": "public, max-age=86400"})


@lru_cache(maxsize=len(_ASSETS))
def _read(path: str) -> bytes:
    return files("app.ops").joinpath("static", path).read_bytes()
