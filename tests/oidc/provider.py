"""The suite's OpenID Provider (provider.mjs: the npm package oidc-provider) started on
127.0.0.1, and a person signing in on its forms without a browser.

Missing node or `npm ci --prefix tests/oidc`: the tests skip, unless TOOLGATE_REQUIRE_OIDC=1
(CI, .ci/run) makes that a failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

HERE = Path(__file__).resolve().parent
REQUIRE = os.environ.get("TOOLGATE_REQUIRE_OIDC") == "1"
PAGE_CLIENT, PAGE_SECRET = "toolgate-page", "toolgate-page-secret"
ROLE_MAP = {"toolgate-approvers": {"role": "approver", "projects": ["payments"]},
            "toolgate-auditors": {"role": "auditor", "projects": None}}


@dataclass
class Provider:
    issuer: str
    proc: subprocess.Popen

    def settings(self, redirect_uri: str | None = None) -> dict[str, object]:
        """Settings (Settings(**...) keys) for toolgate's page to sign in with it."""
        out: dict[str, object] = {
            "oidc_issuer": self.issuer, "oidc_client_id": PAGE_CLIENT,
            "oidc_client_secret": PAGE_SECRET, "oidc_role_map": ROLE_MAP,
            "oidc_scopes": "openid email profile groups"}
        if redirect_uri:
            out["oidc_redirect_uri"] = redirect_uri
        return out


def _missing(message: str) -> None:
    if REQUIRE:
        pytest.fail(f"{message}; TOOLGATE_REQUIRE_OIDC=1")
    pytest.skip(message)


@contextmanager
def provider(redirects: list[str], port: int = 0) -> Iterator[Provider]:
    """A running provider whose page client accepts these redirect URIs."""
    node = shutil.which("node")
    if node is None:
        _missing("node is needed for the OpenID Provider (apt-get install nodejs npm)")
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        _missing("oidc-provider is not installed: npm ci --prefix tests/oidc")
    env = {**os.environ, "OIDC_PORT": str(port), "OIDC_PAGE_REDIRECT": ",".join(redirects),
           "OIDC_CLIENT_SECRET": PAGE_SECRET}
    proc = subprocess.Popen([str(node), str(HERE / "provider.mjs")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(60)
        if not line or not line[0].strip():
            raise RuntimeError("the OpenID Provider did not start within 60 s")
        yield Provider(issuer=json.loads(line[0])["issuer"], proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


_FORM = re.compile(r'<form[^>]*action="([^"]+)"', re.S)
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


async def authorize(url: str, login: str, *, stop_at: str) -> str:
    """Follow an authorization URL at the provider as `login` would in a browser (the
    development sign-in form, then consent) until it redirects to a URL starting with
    `stop_at`; that URL (with code and state) is returned."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=20) as browser:
        for _ in range(20):
            if url.startswith(stop_at):
                return url
            answer = await browser.get(url)
            if answer.is_redirect:
                url = urljoin(url, answer.headers["location"])
                continue
            form = _FORM.search(answer.text)
            if answer.status_code != 200 or form is None:
                raise AssertionError(f"the provider answered {answer.status_code}: "
                                     f"{answer.text[:500]}")
            fields = {k: unescape(v) for k, v in _HIDDEN.findall(answer.text)}
            if fields.get("prompt") == "login":
                fields.update(login=login, password="any password")
            answer = await browser.post(urljoin(url, unescape(form.group(1))), data=fields)
            if not answer.is_redirect:
                raise AssertionError(f"the form answered {answer.status_code}: "
                                     f"{answer.text[:500]}")
            url = urljoin(url, answer.headers["location"])
    raise AssertionError("more than 20 steps at the provider")


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
