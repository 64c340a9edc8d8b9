"""Named profiles, global config, projects and actions (SPEC §4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.auth.deps import PrincipalDep
from app.auth.scope import action_not_found
from app.edge.errors import Conflict, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, NameParam, ProfileNameParam, Session
from app.kit.schemas import NAME_PATTERN
from app.log.audit import audit_change
from app.profiles import repository as profile_repo
from app.profiles.deps import ProfilesDep
from app.profiles.schemas import (
    ActionIn,
    ActionList,
    ActionOut,
    ConfigOut,
    ProfileChoice,
    ProfileIn,
    ProfileList,
    ProfileOut,
    ProfileVersionList,
    ProjectList,
    ProjectOut,
)

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["configuration"])


def _versioned(row) -> dict:  # type: ignore[no-untyped-def]
    return {"description": row.description, "safety": row.safety, "version": row.version}


def _profile(row) -> dict:  # type: ignore[no-untyped-def]
    return {"name": row.name, "description": row.description, "safety": row.safety,
            "version": row.version, "created_at": row.created_at, "updated_at": row.updated_at}


@router.put("/profiles/{name}", response_model=ProfileOut, status_code=200,
            responses={201: {"model": ProfileOut, "description": "Created"}, **errors(409)})
async def put_profile(name: ProfileNameParam, body: ProfileIn, session: Session,
                      response: Response, caller: CallerDep, profiles: ProfilesDep) -> dict:
    existing = await profile_repo.lock_profile(session, name)
    before = _versioned(existing) if existing else None
    row, created, changed = await profile_repo.put_profile(
        session, existing, name, description=body.description, safety=body.safety.as_dict()
    )
    if changed:
        await audit_change(session, caller, resource="profile", name=name,
                           operation="create" if created else "update",
                           before=before, after=_versioned(row))
        # A project evaluates its decisions under this profile too (SPEC §12): every
        # replica's registry cache reloads it, as for a settings change.
        await profiles.changed(session, name)
    response.status_code = 201 if created else 200
    return _profile(row)


@router.get("/profiles", response_model=ProfileList)
async def list_profiles(session: Session) -> dict:
    return {"items": [_profile(row) for row in await profile_repo.list_profiles(session)]}


@router.get("/profiles/{name}", response_model=ProfileOut, responses=errors(404))
async def get_profile(name: ProfileNameParam, session: Session) -> dict:
    row = await profile_repo.get_profile(session, name)
    if row is None:
        raise NotFound(f"profile '{name}' does not exist", profile=name)
    return _profile(row)


@router.get("/profiles/{name}/versions", response_model=ProfileVersionList,
            responses=errors(404))
async def list_profile_versions(name: ProfileNameParam, session: Session) -> dict:
    # The versions of a deleted profile are kept (a re-created one continues them), but
    # like GET /v1/profiles/{name} this answers only for a profile that exists.
    if await profile_repo.get_profile(session, name) is None:
        raise NotFound(f"profile '{name}' does not exist", profile=name)
    rows = await profile_repo.list_profile_versions(session, name)
    return {"items": [
        {"name": r.name, "version": r.version, "description": r.description,
         "safety": r.safety, "created_at": r.created_at} for r in rows
    ]}


@router.delete("/profiles/{name}", status_code=204, responses=errors(
    404, 409, s409="The profile is still named by the config, a project or an action "
                   "(code profile_in_use, naming them)"))
async def delete_profile(name: ProfileNameParam, session: Session,
                         caller: CallerDep, profiles: ProfilesDep) -> Response:
    row = await profile_repo.lock_profile(session, name)
    if row is None:
        raise NotFound(f"profile '{name}' does not exist", profile=name)
    refs = await profile_repo.profile_references(session, name)
    if shadowing := await profiles.shadowing(session, name):
        refs["shadow_projects"] = shadowing
    if refs:
        users = []
        if refs.get("config"):
            users.append("the global config")
        if refs.get("projects"):
            users.append(f"projects {refs['projects']}")
        if refs.get("actions"):
            users.append(f"actions {refs['actions']}")
        if refs.get("shadow_projects"):
            users.append(f"the shadow_profile setting of projects {refs['shadow_projects']}")
        named = ", ".join(users)
        raise Conflict(f"profile '{name}' is still named by {named}", code="profile_in_use",
                       profile=name, **refs)
    before = _versioned(row)
    await profile_repo.delete_profile(session, row)
    await audit_change(session, caller, resource="profile", name=name, operation="delete",
                       before=before, after=None)
    return Response(status_code=204)


@router.get("/config", response_model=ConfigOut)
async def get_config(session: Session) -> dict:
    row = await profile_repo.get_config(session)
    if row is None:
        return {"automation_profile": None, "updated_at": None}
    return {"automation_profile": row.automation_profile, "updated_at": row.updated_at}


@router.put("/config", response_model=ConfigOut, responses=errors(409))
async def put_config(body: ProfileChoice, session: Session, caller: CallerDep) -> dict:
    await profile_repo.require_profile(session, body.automation_profile, "automation_profile")
    existing = await profile_repo.lock_config(session)
    before = existing.automation_profile if existing else None
    row = await profile_repo.put_config(session, existing, body.automation_profile)
    if existing is None or before != row.automation_profile:
        await audit_change(session, caller, resource="config", name=None, operation="update",
                           before={"automation_profile": before},
                           after={"automation_profile": row.automation_profile})
    return {"automation_profile": row.automation_profile, "updated_at": row.updated_at}


def _project(row) -> dict:  # type: ignore[no-untyped-def]
    return {"project": row.project, "automation_profile": row.automation_profile,
            "created_at": row.created_at, "updated_at": row.updated_at}


@router.put("/projects/{project}", response_model=ProjectOut,
            responses={201: {"model": ProjectOut, "description": "Created"},
                       **errors(404, 409)})
async def put_project(project: NameParam, body: ProfileChoice, session: Session,
                      response: Response, caller: CallerDep) -> dict:
    await profile_repo.require_profile(session, body.automation_profile, "automation_profile")
    existing = await profile_repo.lock_project(session, project)
    before = {"automation_profile": existing.automation_profile} if existing else None
    row, created = await profile_repo.put_project(session, existing, project,
                                                  body.automation_profile)
    after = {"automation_profile": row.automation_profile}
    if before != after:
        await audit_change(session, caller, resource="project", name=project, project=project,
                           operation="create" if created else "update",
                           before=before, after=after)
    response.status_code = 201 if created else 200
    return _project(row)


@router.get("/projects", response_model=ProjectList)
async def list_projects(session: Session, principal: PrincipalDep) -> dict:
    """Configured projects, filtered to the key's projects."""
    rows = await profile_repo.list_projects(session, projects=principal.project_list())
    return {"items": [_project(row) for row in rows]}


@router.get("/projects/{project}", response_model=ProjectOut, responses=errors(404))
async def get_project(project: NameParam, session: Session) -> dict:
    row = await profile_repo.get_project(session, project)
    if row is None:
        raise NotFound(f"project '{project}' does not exist", project=project)
    return _project(row)


def _action(row) -> dict:  # type: ignore[no-untyped-def]
    return {"action_id": row.action_id, "project": row.project, "read_only": row.read_only,
            "automation_profile": row.automation_profile, "safety_profile": row.safety_profile,
            "created_at": row.created_at, "updated_at": row.updated_at}


@router.put("/actions/{action_id}", response_model=ActionOut,
            responses={201: {"model": ActionOut, "description": "Created"}, **errors(409)})
async def put_action(action_id: NameParam, body: ActionIn, session: Session,
                     response: Response, caller: CallerDep) -> dict:
    await profile_repo.require_profile(session, body.automation_profile, "automation_profile")
    existing = await profile_repo.lock_action(session, action_id)
    before = _action_config(existing) if existing else None
    row, created = await profile_repo.put_action(
        session, existing, action_id, project=body.project, read_only=body.read_only,
        automation_profile=body.automation_profile,
        safety_profile=body.safety_profile.as_dict() if body.safety_profile else None,
    )
    after = _action_config(row)
    if before != after:
        await audit_change(session, caller, resource="action", name=action_id,
                           project=row.project, operation="create" if created else "update",
                           before=before, after=after)
    response.status_code = 201 if created else 200
    return _action(row)


def _action_config(row) -> dict:  # type: ignore[no-untyped-def]
    return {"project": row.project, "read_only": row.read_only,
            "automation_profile": row.automation_profile, "safety_profile": row.safety_profile}


@router.get("/actions", response_model=ActionList)
async def list_actions(session: Session, principal: PrincipalDep,
                       project: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None
                       ) -> dict:
    """Actions, filtered to the key's projects (an action in no project is visible only
    to unscoped keys)."""
    rows = await profile_repo.list_actions(session, projects=principal.project_list(),
                                   project=project)
    return {"items": [_action(row) for row in rows]}


@router.get("/actions/{action_id}", response_model=ActionOut, responses=errors(404))
async def get_action(action_id: NameParam, session: Session,
                     principal: PrincipalDep) -> dict:
    row = await profile_repo.get_action(session, action_id)
    if row is None or not principal.sees(row.project):
        raise action_not_found(action_id)
    return _action(row)
