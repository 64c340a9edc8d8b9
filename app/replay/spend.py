"""What each plan and project had spent (spent + held, SPEC §11) at a point of the log,
rebuilt from the records before it, in log order: what replay gives checks 7/8 of a
decision that did not read the ledger itself (its plan had no cost limit) when the
candidate's profile has one (SPEC §17). Pure: records' fields in, sums out.

What moves the sums (app/ledger/service.py), in terms of spent + held:
- an allowed decision whose own plan profile read the ledger (its record's
  `effective.accumulated_cost`) holds its `context.estimated_cost`;
- an outcome adds its cost and releases its decision's hold (a hold that lapsed was
  charged as spent, which leaves the sum as it was, and the report takes the charge back:
  the same effect);
- a credit lowers a plan's spent and its project's, or a project's only (a plan whose
  name is its project's is taken for the project).
A hold taken for a decision whose record then failed (503) is not in the log; its charge,
when it lapses, is not seen here."""

from __future__ import annotations

from typing import Any

from app.ledger.service import NO_PROJECT

# Holds not yet settled, remembered to be released by their outcome: past this many the
# sums are no longer known (the decisions that need them are counted unreplayable).
MAX_OPEN_HOLDS = 200_000


class Spend:
    def __init__(self) -> None:
        self.plans: dict[str, float] = {}
        self.projects: dict[str, float] = {}
        self.holds: dict[str, tuple[str, str, float]] = {}
        self.lost = False

    def known(self, plan_id: str, project: str | None) -> tuple[float, float] | None:
        if self.lost:
            return None
        return self.plans.get(plan_id, 0.0), self.projects.get(project or NO_PROJECT, 0.0)

    def _add(self, plan_id: str | None, project: str, amount: float) -> None:
        if plan_id is not None:
            self.plans[plan_id] = self.plans.get(plan_id, 0.0) + amount
        self.projects[project] = self.projects.get(project, 0.0) + amount

    def authorized(self, decision_id: str, plan_id: str, project: str | None,
                   detail: dict[str, Any]) -> None:
        """An allowed plan decision: its hold, if its plan's profile took one."""
        if "accumulated_cost" not in (detail.get("effective") or {}):
            return  # not metered by its own profile: no hold
        amount = (detail.get("context") or {}).get("estimated_cost") or 0.0
        if not amount:
            return
        if len(self.holds) >= MAX_OPEN_HOLDS:
            self.lost = True
            return
        key = project or NO_PROJECT
        self.holds[decision_id] = (plan_id, key, amount)
        self._add(plan_id, key, amount)

    def outcome(self, plan_id: str, project: str | None, detail: dict[str, Any]) -> None:
        out = detail.get("outcome") or {}
        held = self.holds.pop(out.get("decision_id"), ("", "", 0.0))[2]
        self._add(plan_id, project or NO_PROJECT, float(out.get("cost") or 0.0) - held)

    def config(self, project: str | None, detail: dict[str, Any]) -> None:
        """A configuration record: a ledger credit lowers spent."""
        if detail.get("resource") != "ledger" or detail.get("operation") != "credit":
            return
        amount = float((detail.get("after") or {}).get("amount") or 0.0)
        name = detail.get("name")
        key = project or NO_PROJECT
        # A project's credit names the project; a plan's names the plan (and lowers its
        # project's too). A plan named as its own project is read as the project's.
        self._add(None if name == key else name, key, -amount)
