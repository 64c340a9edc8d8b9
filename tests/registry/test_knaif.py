"""The knaif project's real data through the routes (tests/peercases.py): its skills put
with PUT /v1/skills, their utterances screened by POST /v1/screen and the safety-test route,
its tools registered with their path_args and its path and gate cases replayed by
POST /v1/test (not recorded)."""

from __future__ import annotations

from sqlalchemy import update

from app.registry.tables import Skill
from tests import peercases

SKILLS = [s["name"] for s in peercases.knaif()["skills"]]


async def _put_skills(client) -> None:
    for skill in peercases.knaif()["skills"]:
        r = await client.put(f"/v1/skills/{skill['name']}",
                             json={"unsafe_phrases": skill["unsafe_phrases"]})
        assert r.status_code == 201, r.text
        assert r.json()["unsafe_phrases"] == skill["normalized_phrases"]


async def test_must_reject_and_must_pass_utterances(client):
    await _put_skills(client)
    for skill in SKILLS:
        cases = [(text, rejected) for s, text, rejected, _ in peercases.utterances()
                 if s == skill]
        r = await client.post(f"/v1/skills/{skill}/safety-test", json=[t for t, _ in cases])
        assert r.status_code == 200, r.text
        missed = [m["text"] for m in r.json()["missed"]]
        assert missed == [text for text, rejected in cases if not rejected], skill
    # The must-reject ones through the screen itself, which names the phrase.
    must_reject = peercases.utterances()[:len(peercases.knaif()["must_reject"])]
    for skill, text, rejected, phrase in must_reject:
        r = await client.post("/v1/screen", json={"skill": skill, "text": text})
        assert r.status_code == 200, r.text
        assert (r.json()["rejected"], r.json()["matched_phrase"]) == (
            rejected, phrase if rejected else None), text


async def test_double_space_and_tab_do_not_walk_past(client):
    await _put_skills(client)
    for text in sorted(peercases.SPEC_5_NOW_REJECTS) + ["RUN RM \u3000-RF", "ｒｍ -ｒｆ"]:
        r = await client.post("/v1/screen", json={"skill": "ffmpeg", "text": text})
        assert r.json()["matched_phrase"] == "rm -rf", text
        r = await client.post("/v1/screen", json={"text": text})
        assert r.json()["rejected"] is True, text


async def test_phrases_stored_with_the_old_normalisation_still_match(client):
    """Rows written before SPEC §5's rule (only stripped and lowercased) are normalised when
    screening: no migration needed."""
    await client.put("/v1/skills/legacy", json={"unsafe_phrases": ["rm -rf"]})
    async with client.app.state.sessions() as session, session.begin():
        await session.execute(update(Skill).where(Skill.name == "legacy")
                              .values(unsafe_phrases=["rm  -rf", "ｗｉｐｅ\tａｌｌ"]))
    for text, phrase in [("rm -rf /", "rm -rf"), ("RM\t-RF", "rm -rf"),
                         ("please WIPE ALL", "wipe all")]:
        r = await client.post("/v1/screen", json={"skill": "legacy", "text": text})
        assert r.json()["matched_phrase"] == phrase, text
    r = await client.post("/v1/skills/legacy/safety-test", json=["rm   -rf", "wipe  all"])
    assert r.json()["ok"] is True


def _tool_body(tool: dict) -> dict:
    return {"capability": {"writes": not tool["readonly"], "read_only": tool["readonly"],
                           "checkpointable": True, "unsafe": False},
            "safety_category": tool["safety_category"], "path_args": tool["path_args"]}


async def test_path_and_gate_cases(client):
    data = peercases.knaif()
    used = {(c["skill"], c["tool"]) for c in data["path_cases"] + data["gate_cases"]}
    for skill, name in sorted(used):
        r = await client.put(f"/v1/tools/{skill}.{name}",
                             json=_tool_body(peercases.tool(skill, name)))
        assert r.status_code == 201, r.text
    cases = []
    for case in data["path_cases"]:
        allowed = case["expect"] == "allow"
        cases.append({"name": case["name"], "request": {
            "tool": {"name": f"{case['skill']}.{case['tool']}",
                     "args": {case["arg"]: case["value"]}},
            # confirmed: a destructive tool is let through check 9, so check 10 decides.
            "context": {"sandbox_id": "sb", "sandbox_root": case["sandbox_root"],
                        "variables": case["variables"], "confirmed": True}},
            "expect": {"allowed": allowed, "code": None if allowed else "sandbox_path_escape"}})
    for case in data["gate_cases"]:
        allowed = case["knaif"] == "allow"
        cases.append({"name": f"gate {case['tool']} {case['args']}", "request": {
            "tool": {"name": f"{case['skill']}.{case['tool']}", "args": case["args"]},
            "context": {"sandbox_id": "sb", "sandbox_root": "/srv/knaif-sb/sandbox",
                        "dry_run": case["dry_run"], "confirmed": case["confirmed"]}},
            "expect": {"allowed": allowed,
                       "code": None if allowed else "confirmation_required"}})
    r = await client.post("/v1/test", json=cases)
    assert r.status_code == 200, r.text
    failed = [(f["name"], f["actual"], f["problem"]) for f in r.json()["results"] if not f["ok"]]
    assert not failed
    assert r.json()["total"] == 47
