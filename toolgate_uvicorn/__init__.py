"""A serving plug-in for uvicorn: its httptools protocol with toolgate's hot route answered
in the protocol (no ASGI task per request). Kept outside `app/` because it subclasses
uvicorn's private `HttpToolsProtocol`: pyproject pins the uvicorn versions it was tested
with, and `toolgate serve` falls back to uvicorn's own protocol on any other version."""
