"""Tool registry, skills, pre-model screening and safety tests (SPEC §5, seed 003)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.auth.deps import PrincipalDep
from app.edge.bodies import bad, parse_items
from app.edge.errors import NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.caller import new_decision_id
from app.kit.deps import CallerDep, NameParam, Session, Sessions
from app.log.audit import audit_change, record_decisions
from app.log.deps import DecisionLogDep
from app.log.records import new_record
from app.policy.screening import phrase_warnings, screen, screen_deny, screen_skills
from app.profiles import service as profile_service
from app.registry import repository as registry_repo
from app.registry.deps import RegistryDep
from app.registry.schemas import (
    MAX_TEXT_CHARS,
    ProjectSettingsIn,
    ProjectSettingsList,
    ProjectSettingsOut,
    RegistrySettingsIn,
    RegistrySettingsOut,
    SafetyTestOut,
    ScreenIn,
    ScreenOut,
    SkillIn,
    SkillList,
    SkillOut,
    ToolDefIn,
    ToolList,
    ToolOut,
)
from app.registry.tables import ProjectSettings, RegistryTool, Skill

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["registry"])
# The safety test takes JSON or JSONL, so it reads its body itself: JSONRoute would force
# every body through the JSON parser.
safety_test_router = APIRouter(prefix="/v1", tags=["registry"])


# --- tools ------------------------------------------------------------------------------

def _tool(row: RegistryTool) -> dict[str, Any]:
    return {
        "name": row.name,
        "capability": {"writes": row.writes, "read_only": row.read_only,
                       "checkpointable": row.checkpointable, "unsafe": row.unsafe},
        "safety_category": row.safety_category,
        "skill_category": row.skill_category,
        "path_args": row.path_args,
        "human_approval": row.human_approval,
        "shell": {"arg": row.shell_arg} if row.shell_arg is not None else None,
        "url_args": list(row.url_args or ()),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


@router.put("/tools/{name}", response_model=ToolOut,
            responses={201: {"model": ToolOut, "description": "Created"}, **errors(409)})
async def put_tool(name: NameParam, body: ToolDefIn, session: Session, registry: RegistryDep,
                   response: Response, caller: CallerDep) -> dict:
    """Register or reclassify a tool; decisions on every replica use it within the
    registry's staleness bound (`registry_ttl_seconds`), on this one at once."""
    cap = body.capability
    existing = await registry_repo.lock_tool(session, name)
    before = _tool_config(existing) if existing else None
    row, created, changed = await registry_repo.put_tool(
        session, existing, name, writes=cap.writes, read_only=cap.read_only,
        checkpointable=cap.checkpointable, unsafe=cap.unsafe,
        safety_category=body.safety_category, skill_category=body.skill_category,
        path_args=list(dict.fromkeys(body.path_args)),
        human_approval=body.human_approval,
        shell_arg=body.shell.arg if body.shell is not None else None,
        url_args=list(dict.fromkeys(body.url_args)),
    )
    if changed:
        registry.invalidate_on_commit(session)
        await audit_change(session, caller, resource="tool", name=name,
                           operation="create" if created else "update",
                           before=before, after=_tool_config(row))
    response.status_code = 201 if created else 200
    return _tool(row)


def _tool_config(row: RegistryTool) -> dict[str, Any]:
    config = {k: v for k, v in _tool(row).items() if k not in ("created_at", "updated_at")}
    for key, empty in (("shell", None), ("url_args", [])):
        if config[key] == empty:  # audit records of tools without them stay as they were
            del config[key]
    return config


@router.get("/tools", response_model=ToolList)
async def list_tools(session: Session) -> dict:
    return {"items": [_tool(row) for row in await registry_repo.list_tools(session)]}


@router.get("/tools/{name}", response_model=ToolOut, responses=errors(404))
async def get_tool(name: NameParam, session: Session) -> dict:
    row = await registry_repo.get_tool(session, name)
    if row is None:
        raise NotFound(f"tool '{name}' is not in the registry", tool=name)
    return _tool(row)


@router.delete("/tools/{name}", status_code=204, responses=errors(404))
async def delete_tool(name: NameParam, session: Session, registry: RegistryDep,
                      caller: CallerDep) -> Response:
    existing = await registry_repo.lock_tool(session, name)
    if existing is None:
        raise NotFound(f"tool '{name}' is not in the registry", tool=name)
    before = _tool_config(existing)
    await registry_repo.delete_tool(session, existing)
    registry.invalidate_on_commit(session)
    await audit_change(session, caller, resource="tool", name=name, operation="delete",
                       before=before, after=None)
    return Response(status_code=204)


# --- skills -----------------------------------------------------------------------------

def _skill(row: Skill) -> dict[str, Any]:
    return {
        "name": row.name,
        "category": row.category,
        "unsafe_phrases": row.unsafe_phrases,
        "warnings": phrase_warnings(row.unsafe_phrases),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


async def _get_skill(session: Any, name: str) -> Skill:
    row = await registry_repo.get_skill(session, name)
    if row is None:
        raise NotFound(f"skill '{name}' does not exist", skill=name)
    return row


@router.put("/skills/{name}", response_model=SkillOut,
            responses={201: {"model": SkillOut, "description": "Created"}, **errors(409)})
async def put_skill(name: NameParam, body: SkillIn, session: Session,
                    response: Response, caller: CallerDep) -> dict:
    """`warnings` names each phrase likely to reject legitimate requests (a bare word, or
    fewer than 4 characters); the skill is stored all the same."""
    existing = await registry_repo.lock_skill(session, name)
    before = ({"category": existing.category, "unsafe_phrases": list(existing.unsafe_phrases)}
              if existing else None)
    row, created = await registry_repo.put_skill(
        session, existing, name, category=body.category, unsafe_phrases=body.unsafe_phrases
    )
    after = {"category": row.category, "unsafe_phrases": list(row.unsafe_phrases)}
    if before != after:
        await audit_change(session, caller, resource="skill", name=name,
                           operation="create" if created else "update",
                           before=before, after=after)
    response.status_code = 201 if created else 200
    return _skill(row)


@router.get("/skills", response_model=SkillList)
async def list_skills(session: Session) -> dict:
    return {"items": [_skill(row) for row in await registry_repo.list_skills(session)]}


@router.get("/skills/{name}", response_model=SkillOut, responses=errors(404))
async def get_skill(name: NameParam, session: Session) -> dict:
    return _skill(await _get_skill(session, name))


@router.delete("/skills/{name}", status_code=204, responses=errors(404))
async def delete_skill(name: NameParam, session: Session, caller: CallerDep) -> Response:
    existing = await registry_repo.lock_skill(session, name)
    if existing is None:
        raise NotFound(f"skill '{name}' does not exist", skill=name)
    before = {"category": existing.category, "unsafe_phrases": list(existing.unsafe_phrases)}
    await registry_repo.delete_skill(session, existing)
    await audit_change(session, caller, resource="skill", name=name, operation="delete",
                       before=before, after=None)
    return Response(status_code=204)


# --- screening --------------------------------------------------------------------------

@router.post("/screen", response_model=ScreenOut, responses=errors(404),
             summary="Pre-model rejection: does the text contain a skill's unsafe phrase?")
async def screen_text(body: ScreenIn, sessions: Sessions, decision_log: DecisionLogDep,
                      caller: CallerDep) -> dict:
    """Deterministic substring match of text and phrases normalised alike (SPEC §5: NFKC,
    case-folded, whitespace runs made one space), phrases in the skill's stored order, first
    match wins. Without `skill`, every skill is screened in name order. A rejection is a
    successful answer (200), like a deny."""
    # A read-only session, closed before the decision is recorded: holding it (on SQLite,
    # a write transaction for a POST) while the log writer waits for the lock would stall.
    async with sessions() as session:
        if body.skill is not None:
            row = await _get_skill(session, body.skill)
            phrase = screen(body.text, row.unsafe_phrases)
            match = (row.name, phrase) if phrase is not None else None
        else:
            skills = await registry_repo.list_skills(session)
            match = screen_skills(body.text, ((s.name, s.unsafe_phrases) for s in skills))
    decision_id = new_decision_id()
    if match is None:
        answer = {"decision_id": decision_id, "rejected": False, "matched_phrase": None,
                  "skill": body.skill, "error": None, "code": None,
                  "message": "no unsafe phrase matched"}
    else:
        skill, phrase = match
        rejection = screen_deny(skill, phrase)
        answer = {"decision_id": decision_id, "rejected": True, "matched_phrase": phrase,
                  "skill": skill, "error": rejection.error, "code": rejection.code,
                  "message": rejection.message}
    # Like any decision: recorded before it is answered (503 otherwise).
    await record_decisions(decision_log, [new_record(
        "screen", decision_id, allowed=not answer["rejected"], code=answer["code"],
        error=answer["error"], check=rejection.check if match is not None else None,
        request_id=caller.request_id, key_id=caller.key_id,
        detail={"skill": answer["skill"], "matched_phrase": answer["matched_phrase"],
                "text": body.text[:SCREEN_TEXT_KEPT], "text_length": len(body.text)},
    )])
    return answer


# The screened text is kept in the log for incident reconstruction, up to this many
# characters (agents' requests can be long; the phrase match is what matters).
SCREEN_TEXT_KEPT = 2000


# --- safety tests -----------------------------------------------------------------------

_TEXT = {"type": "string", "maxLength": MAX_TEXT_CHARS}
# A string, or an object carrying it under exactly one of `text` or `utterance` (_utterance).
UTTERANCE = {"oneOf": [
    _TEXT,
    {"type": "object", "required": ["text"], "properties": {"text": _TEXT}},
    {"type": "object", "required": ["utterance"], "properties": {"utterance": _TEXT}},
]}
SAFETY_TEST_BODY = {
    "requestBody": {
        "required": True,
        "description": (
            "Utterances that must be rejected, each a JSON string or an object with `text` "
            "(or `utterance`; its other keys are ignored): as a JSON list, as "
            "`{\"utterances\": [...]}`, or as JSONL (`application/x-ndjson` or `text/plain`), "
            "one per line, blank lines skipped. `missed[].line` is the JSONL line number, or "
            "the 1-based position in a JSON list."
        ),
        "content": {
            "application/json": {"schema": {"oneOf": [
                {"type": "array", "items": UTTERANCE, "minItems": 1},
                {"type": "object", "required": ["utterances"], "additionalProperties": False,
                 "properties": {"utterances": {"type": "array", "items": UTTERANCE,
                                               "minItems": 1}}},
            ]}},
            "application/x-ndjson": {"schema": {"type": "string"},
                                     "example": "\"rm -rf /\"\n{\"text\": \"format drive C\"}\n"},
            "text/plain": {"schema": {"type": "string"}},
        },
    }
}


def _utterance(item: Any, field: str) -> str:
    """A string, or an object carrying it under `text` or `utterance`."""
    if isinstance(item, dict):
        keys = [k for k in ("text", "utterance") if k in item]
        if len(keys) != 1:
            raise bad(field, "an object needs exactly one of 'text' or 'utterance'",
                       "missing" if not keys else "value_error")
        item = item[keys[0]]
        field = f"{field}.{keys[0]}"
    if not isinstance(item, str):
        raise bad(field, "an utterance must be a string", "string_type")
    if len(item) > MAX_TEXT_CHARS:
        raise bad(field, f"an utterance is at most {MAX_TEXT_CHARS} characters",
                   "string_too_long")
    return item


def parse_utterances(body: bytes, content_type: str) -> list[tuple[int, str]]:
    """(line or position, utterance) pairs; InvalidInput naming the first bad one."""
    return parse_items(body, content_type, key="utterances", item=_utterance)


@safety_test_router.post(
    "/skills/{name}/safety-test", response_model=SafetyTestOut,
    summary="Check that every utterance is rejected by the skill's phrases",
    openapi_extra=SAFETY_TEST_BODY, responses=errors(404),
)
async def safety_test(name: NameParam, request: Request, session: Session) -> dict:
    """Seed 003 "Testing the gate": utterances that must be rejected. `ok` is true when
    every one was; `missed` names each that was not, with its line."""
    items = parse_utterances(await request.body(), request.headers.get("content-type", ""))
    skill = await _get_skill(session, name)
    missed = [{"line": line, "text": text} for line, text in items
              if screen(text, skill.unsafe_phrases) is None]
    return {"skill": skill.name, "total": len(items), "rejected": len(items) - len(missed),
            "missed": missed, "ok": not missed}


# --- per-project settings (SPEC §9) ------------------------------------------------------

def _settings(project: str, row: ProjectSettings | None) -> dict[str, Any]:
    return {"project": project, **registry_repo.settings_of(row),
            "updated_at": row.updated_at if row is not None else None}


@router.put("/projects/{project}/settings", response_model=ProjectSettingsOut)
async def put_project_settings(project: NameParam, body: ProjectSettingsIn, session: Session,
                               registry: RegistryDep, caller: CallerDep) -> dict:
    """Replaces the project's settings whole (a field left out takes its default). Decisions
    on every replica use them as they use registry changes (app/registry/service.py).
    `shadow_profile`: every decision of the project's plans is evaluated under it too
    (docs/replay.md)."""
    await profile_service.require_profile(session, body.shadow_profile, "shadow_profile")
    after = body.model_dump()
    row, before = await registry_repo.put_project_settings(session, project, after)
    if before != after:
        registry.invalidate_on_commit(session)
        await audit_change(session, caller, resource="project_settings", name=project,
                           project=project, operation="create" if before is None else "update",
                           before=before, after=after)
    return _settings(project, row)


@router.get("/projects/{project}/settings", response_model=ProjectSettingsOut)
async def get_project_settings(project: NameParam, session: Session) -> dict:
    """The defaults (and `updated_at: null`) for a project whose settings were never set."""
    return _settings(project, await registry_repo.get_project_settings(session, project))


@router.get("/project-settings", response_model=ProjectSettingsList,
            summary="Every project whose settings were set, within the key's projects")
async def list_project_settings(session: Session, principal: PrincipalDep) -> dict:
    rows = await registry_repo.list_project_settings(session, projects=principal.project_list())
    return {"items": [_settings(row.project, row) for row in rows]}


@router.put("/projects/{project}/registry-settings", response_model=RegistrySettingsOut,
            responses=errors(404, 409))
async def put_registry_settings(project: NameParam, body: RegistrySettingsIn,
                                session: Session, registry: RegistryDep, caller: CallerDep) -> dict:
    """`deny_unregistered_tools`: decisions in this project refuse tools missing from the
    registry instead of trusting a submitted capability. Part one's route: it changes only
    this one of the project's settings (`/settings` holds them all)."""
    row, before = await registry_repo.put_project_settings(
        session, project, {"deny_unregistered_tools": body.deny_unregistered_tools})
    was = before["deny_unregistered_tools"] if before is not None else None
    if was != row.deny_unregistered_tools:
        registry.invalidate_on_commit(session)
        await audit_change(session, caller, resource="registry_settings", name=project,
                           project=project, operation="update",
                           before={"deny_unregistered_tools": was},
                           after={"deny_unregistered_tools": row.deny_unregistered_tools})
    return {"project": row.project, "deny_unregistered_tools": row.deny_unregistered_tools,
            "updated_at": row.updated_at}


@router.get("/projects/{project}/registry-settings", response_model=RegistrySettingsOut,
            responses=errors(404))
async def get_registry_settings(project: NameParam, session: Session) -> dict:
    row = await registry_repo.get_project_settings(session, project)
    if row is None:
        return {"project": project, "deny_unregistered_tools": False, "updated_at": None}
    return {"project": row.project, "deny_unregistered_tools": row.deny_unregistered_tools,
            "updated_at": row.updated_at}
