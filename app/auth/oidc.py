"""An OpenID Connect / OAuth 2.1 issuer as toolgate trusts it (SPEC §21): its discovery
document, its signing keys (JWKS) and checking a JWT it signed: an ID token for the page's
sign-in (app/auth/oidc_login.py), an access token for the gateway (app/gateway/oauth.py).

The JOSE work (signatures, `alg`, key sets, registered claims) is joserfc's; this module only
decides what is trusted: the issuer named in the settings, asymmetric algorithms only (so
`alg: none` and an HMAC signed with a public key are refused), the audience, expiry and nonce.

The key set is fetched once and kept (at most MAX_KEYS keys, a document of at most MAX_BYTES).
A token signed with a key id the set does not hold refetches it, at most once per
`refresh_seconds` (60) whatever the traffic, so a stream of forged key ids costs the provider
one request a minute. A set older than `max_age_seconds` is refetched when next used; if the
provider does not answer, the old set is kept (tokens it signed keep being checked) and the
failure is logged. Checking a token whose key is known awaits nothing (`verify_cached`).

An MCP client sends the same access token with every call for its lifetime: a token found
valid is remembered (at most MAX_REMEMBERED, keyed by the token and audience) until its
`exp` (plus the leeway) or until the key set is fetched again, whichever comes first, so a
gateway call pays the signature check once per token, not once per call (bench/auth.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jws import extract_compact
from joserfc.jwt import JWTClaimsRegistry

from app.kit.singleflight import SharedReads

log = logging.getLogger("toolgate.auth.oidc")

# Asymmetric signatures only: a key set holds public keys, and a token must be signed by the
# issuer's private key. No "none", no HS*.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
              "ES256", "ES384", "ES512", "EdDSA")
MAX_KEYS = 50
MAX_BYTES = 256 * 1024
MAX_TOKEN_BYTES = 16 * 1024
LEEWAY_SECONDS = 30  # clock skew tolerated on exp/nbf/iat
MAX_REMEMBERED = 10_000


class IssuerUnavailable(Exception):
    """The provider's discovery document or key set could not be read."""


class TokenRejected(Exception):
    """A token that is not valid here; the message says why (shown in 401 answers)."""


@dataclass(frozen=True, slots=True)
class Metadata:
    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str | None
    jwks_uri: str
    end_session_endpoint: str | None


def well_known(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect Discovery, then RFC 8414."""
    base = issuer.rstrip("/")
    return [base + "/.well-known/openid-configuration",
            _rfc8414(issuer)]


def _rfc8414(issuer: str) -> str:
    scheme, _, rest = issuer.rstrip("/").partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}/.well-known/oauth-authorization-server{slash}{path}"


class Issuer:
    def __init__(self, issuer: str, *, timeout: float = 5.0, refresh_seconds: float = 60.0,
                 max_age_seconds: float = 3600.0, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.issuer = issuer
        self.timeout = timeout
        self.refresh_seconds = refresh_seconds
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._wall = wall  # Unix seconds, for remembered tokens' exp
        self._transport = transport
        self._metadata: Metadata | None = None
        self._keys: KeySet | None = None
        self._kids: frozenset[str] = frozenset()
        self._fetched_at = float("-inf")  # when the key set was last fetched (or tried)
        self._loaded_at = float("-inf")  # when the key set held now was fetched
        self._reads: SharedReads[Any] = SharedReads()
        self.fetches = 0  # key set fetches (tests, bench)
        # (token, audience) -> (claims, key set generation, valid until: Unix seconds)
        self._valid: dict[tuple[str, str], tuple[dict[str, Any], int, float]] = {}
        self._generation = 0

    # --- the provider's documents -------------------------------------------------------

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport,
                                         follow_redirects=False) as client:
                async with client.stream("GET", url, headers={"Accept": "application/json"}) \
                        as answer:
                    body = b""
                    async for chunk in answer.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_BYTES:
                            raise IssuerUnavailable(f"{url}: answer larger than {MAX_BYTES} bytes")
                    if answer.status_code != 200:
                        raise IssuerUnavailable(f"{url}: HTTP {answer.status_code}")
            data = httpx.Response(200, content=body).json()
        except IssuerUnavailable:
            raise
        except (httpx.HTTPError, ValueError) as exc:
            raise IssuerUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
        if not isinstance(data, dict):
            raise IssuerUnavailable(f"{url}: not a JSON object")
        return data

    async def metadata(self) -> Metadata:
        if self._metadata is None:
            self._metadata = await self._reads.get("metadata", self._read_metadata)
        return self._metadata

    async def _read_metadata(self) -> Metadata:
        problems = []
        for url in well_known(self.issuer):
            try:
                doc = await self._get_json(url)
            except IssuerUnavailable as exc:
                problems.append(str(exc))
                continue
            if doc.get("issuer") != self.issuer:
                raise IssuerUnavailable(
                    f"{url} names issuer {str(doc.get('issuer'))[:200]!r}, not {self.issuer!r}")
            if not isinstance(doc.get("jwks_uri"), str):
                raise IssuerUnavailable(f"{url} has no jwks_uri")
            return Metadata(issuer=self.issuer, jwks_uri=doc["jwks_uri"],
                            authorization_endpoint=doc.get("authorization_endpoint"),
                            token_endpoint=doc.get("token_endpoint"),
                            end_session_endpoint=doc.get("end_session_endpoint"))
        raise IssuerUnavailable("; ".join(problems))

    async def _read_keys(self) -> KeySet:
        self._fetched_at = self._clock()
        self.fetches += 1
        meta = await self.metadata()
        doc = await self._get_json(meta.jwks_uri)
        keys = doc.get("keys")
        if not isinstance(keys, list):
            raise IssuerUnavailable(f"{meta.jwks_uri}: no 'keys' list")
        usable = []
        for key in keys[:MAX_KEYS]:
            if isinstance(key, dict) and key.get("use", "sig") == "sig" \
                    and key.get("kty") in ("RSA", "EC", "OKP"):
                try:
                    KeySet.import_key_set({"keys": [key]})
                except (JoseError, ValueError, TypeError):
                    continue
                usable.append(key)
        key_set = KeySet.import_key_set({"keys": usable})
        self._keys, self._loaded_at = key_set, self._clock()
        self._generation += 1
        self._valid.clear()
        self._kids = frozenset(k["kid"] for k in usable if isinstance(k.get("kid"), str))
        return key_set

    async def _refresh(self, *, forced: bool) -> None:
        """Fetch the key set again: when there is none, when it is stale, or (`forced`, an
        unknown key id) when the last fetch is at least refresh_seconds old."""
        now = self._clock()
        if self._keys is not None:
            stale = now - self._loaded_at >= self.max_age_seconds
            may = now - self._fetched_at >= self.refresh_seconds
            if not may or not (forced or stale):
                return
        try:
            await self._reads.get("keys", self._read_keys)
        except IssuerUnavailable as exc:
            if self._keys is None:
                raise
            log.warning("refreshing the key set of %s failed (the old one is kept): %s",
                        self.issuer, exc)

    async def warm(self) -> None:
        """Read the discovery document and key set now (raises IssuerUnavailable)."""
        await self._refresh(forced=False)

    # --- tokens -------------------------------------------------------------------------

    def _kid(self, token: str) -> str | None:
        if len(token) > MAX_TOKEN_BYTES:
            raise TokenRejected(f"token longer than {MAX_TOKEN_BYTES} bytes")
        try:
            header = extract_compact(token.encode("ascii")).headers()
        except (JoseError, ValueError, UnicodeError) as exc:
            raise TokenRejected(f"not a signed JWT ({type(exc).__name__})") from None
        if header.get("alg") not in ALGORITHMS:
            raise TokenRejected(f"algorithm {str(header.get('alg'))[:20]!r} is not accepted")
        kid = header.get("kid")
        return kid if isinstance(kid, str) else None

    def verify_cached(self, token: str, *, audience: str, nonce: str | None = None) \
            -> dict[str, Any] | None:
        """The token's claims when its key is in the cached set; None when the set must be
        fetched first (none yet, stale, or an unknown key id). TokenRejected when invalid."""
        if nonce is None:
            hit = self._valid.get((token, audience))
            if hit is not None and hit[1] == self._generation and self._wall() < hit[2] \
                    and self._clock() - self._loaded_at < self.max_age_seconds:
                return hit[0]
        kid = self._kid(token)
        keys = self._keys
        if keys is None or (kid is not None and kid not in self._kids) \
                or self._clock() - self._loaded_at >= self.max_age_seconds:
            return None
        return self._check(token, keys, audience=audience, nonce=nonce)

    async def verify(self, token: str, *, audience: str, nonce: str | None = None) \
            -> dict[str, Any]:
        """The claims of a token this issuer signed for `audience` (and `nonce`, for an ID
        token). TokenRejected when it is not valid; IssuerUnavailable when the key set
        could never be read."""
        claims = self.verify_cached(token, audience=audience, nonce=nonce)
        if claims is not None:
            return claims
        kid = self._kid(token)
        await self._refresh(forced=kid is not None and kid not in self._kids)
        if self._keys is None or (kid is not None and kid not in self._kids):
            raise TokenRejected("signed with a key the issuer does not publish")
        return self._check(token, self._keys, audience=audience, nonce=nonce)

    def _check(self, token: str, keys: KeySet, *, audience: str,
               nonce: str | None) -> dict[str, Any]:
        try:
            claims = jwt.decode(token, keys, algorithms=list(ALGORITHMS)).claims
        except JoseError as exc:
            raise TokenRejected(f"bad signature or token ({exc.error})") from None
        options: dict[str, Any] = {
            "iss": {"essential": True, "value": self.issuer},
            "aud": {"essential": True, "value": audience},
            "exp": {"essential": True},
            "sub": {"essential": True},
        }
        if nonce is not None:
            options["nonce"] = {"essential": True, "value": nonce}
        try:
            JWTClaimsRegistry(now=int(self._wall()), leeway=LEEWAY_SECONDS,
                              **options).validate(claims)
        except JoseError as exc:
            raise TokenRejected(f"claim not accepted: {exc.description or exc.error}") \
                from None
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise TokenRejected("claim 'sub' is not a string")
        if nonce is None and isinstance(claims.get("exp"), int | float):
            if len(self._valid) >= MAX_REMEMBERED:
                del self._valid[next(iter(self._valid))]
            self._valid[(token, audience)] = (claims, self._generation,
                                              float(claims["exp"]) + LEEWAY_SECONDS)
        return claims
