"""A serving plug-in for uvicorn: its httptools protocol with toolgate's hot route answered
in the protocol (no ASGI task per request). Kept outside `app/` because it subclasses
uvicorn's private `HttpToolsProtocol` and imports its private constants: `toolgate serve`
uses it only on the uvicorn releases it was tested with (TESTED_UVICORN, kept in step with
pyproject's pin) and falls back to uvicorn's own protocol on any other, with a warning."""

from __future__ import annotations

from importlib.metadata import version

# uvicorn minor releases this plug-in's tests (tests/toolgate_uvicorn) passed on.
TESTED_UVICORN = ("0.54",)
PROTOCOL = "toolgate_uvicorn.protocol:ToolgateHttpToolsProtocol"


def protocol_for(uvicorn_version: str | None = None) -> str | None:
    """The plug-in's import string for uvicorn.run(http=...), or None when the installed
    uvicorn is not one it was tested with."""
    found = uvicorn_version or version("uvicorn")
    return PROTOCOL if ".".join(found.split(".")[:2]) in TESTED_UVICORN else None
