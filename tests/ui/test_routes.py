"""The operators' page's routes (SPEC §13): its files need no key and carry the CSP; only
the package's own files are served; /v1/whoami tells a key what it may read."""

from __future__ import annotations

import pytest

from app.auth.roles import PERMISSIONS

BARE = {"Authorization": ""}


async def test_the_page_and_its_files_need_no_key_and_carry_the_csp(client):
    page = await client.get("/ui", headers=BARE)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == "default-src 'self'"
    assert page.headers["x-content-type-options"] == "nosniff"
    # Everything it loads comes from toolgate itself: no CDN, works offline.
    for src in ("/ui/app.js", "/ui/app.css", "/ui/uPlot.iife.min.js", "/ui/uPlot.min.css"):
        assert f'"{src}"' in page.text
        r = await client.get(src, headers=BARE)
        assert r.status_code == 200, src
        assert r.headers["content-security-policy"] == "default-src 'self'"
    assert "http://" not in page.text and "https://" not in page.text
    assert (await client.get("/ui/uPlot.LICENSE", headers=BARE)).text.startswith("The MIT")


@pytest.mark.parametrize("name", ["nope.js", "..%2Froutes.py", "%2E%2E%2F__init__.py",
                                  "routes.py", "__init__.py"])
async def test_only_the_pages_own_files_are_served(client, name):
    r = await client.get(f"/ui/{name}", headers=BARE)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


async def test_the_check_order_is_the_cores(client):
    body = (await client.get("/ui/checks.json", headers=BARE)).json()
    names = [c["name"] for c in body["layers"]["runtime"]]
    assert names[0] == "read_only" and "human_approval" in names
    assert names.index("unsafe") < names.index("human_approval")


async def test_whoami_needs_a_key(client):
    r = await client.get("/v1/whoami", headers=BARE)
    assert r.status_code == 401


@pytest.mark.parametrize("role", ["agent", "approver", "auditor", "admin"])
async def test_whoami_names_the_keys_role_and_permissions(client, role):
    # An admin key spans every project; the others are scoped to one.
    projects = None if role == "admin" else ["ops"]
    made = (await client.post("/v1/keys", json={"name": f"k-{role}", "role": role,
                                                 "projects": projects,
                                                 "principal": "someone"})).json()
    r = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {made['key']}"})
    assert r.status_code == 200
    me = r.json()
    assert me["role"] == role and me["key_id"] == made["id"]
    assert me["projects"] == projects and me["principal"] == "someone"
    expected = {name for name, rule in PERMISSIONS.items()
                if role in rule.roles and not (rule.unscoped_only and projects)}
    assert set(me["permissions"]) == expected
    # A scoped key may not verify the whole chain: the page does not offer it.
    assert ("audit.verify" in me["permissions"]) == (role == "admin")
    assert ("decisions.read" in me["permissions"]) == (role in ("admin", "auditor"))
