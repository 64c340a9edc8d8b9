// Approvals (SPEC §10, docs/ui.md): the queue, and one approval with everything an
// approver grants: the call the agent made (tool, arguments, context, the deny's message),
// its plan and the plan's ledger, who asked. Grant, reject and cancel each ask first.
"use strict";

const STATES = ["pending", "granted", "rejected", "cancelled", "expired", "used", ""];

async function approvals(params) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : "pending";
  const cursors = (params.get("cursors") || "").split(",").filter(Boolean);
  const page = await api("/v1/approvals" + query({ state, limit: 50, cursor: cursors[cursors.length - 1] || "" }));
  await learn(page.items.flatMap((a) => [a.requested_by, a.decided_by]));
  const open = (a) => { location.hash = "approval/" + encodeURIComponent(a.approval_id); };
  show(el("h1", {}, "Approvals"),
    el("div", { class: "toolbar" }, el("label", {}, "state", el("select", { id: "state", onchange: (e) => { location.hash = "approvals" + query({ state: e.target.value }); } },
      STATES.map((s) => el("option", { value: s, selected: s === state }, s || "any"))))),
    page.items.length ? el("table", { id: "approval-list" },
      el("tr", {}, ["requested (UTC)", "state", "project", "plan", "tool", "arguments", "asked by", "decided by", "expires", ""].map((h) => el("th", {}, h))),
      page.items.map((a) => el("tr", { class: "link", "data-id": a.approval_id, onclick: () => open(a) },
        el("td", {}, a.requested_at), el("td", {}, a.state), el("td", {}, a.project), el("td", {}, a.plan_id),
        el("td", {}, a.tool), el("td", {}, el("code", {}, JSON.stringify(a.request && a.request.args))),
        el("td", {}, person(a.requested_by)), el("td", {}, a.decided_by ? person(a.decided_by) : null),
        el("td", {}, a.expires_at),
        el("td", {}, el("button", { type: "button", class: "open" }, a.state === "pending" && may("approvals.decide") ? "Review" : "Open")))))
      : el("p", { class: "muted", id: "no-approvals" }, `No ${state} approvals.`),
    el("div", { class: "pager" },
      el("button", { type: "button", disabled: !cursors.length, onclick: () => { location.hash = "approvals" + query({ state, cursors: cursors.slice(0, -1).join(",") }); } }, "← newer"),
      el("button", { type: "button", disabled: !page.next_cursor, onclick: () => { location.hash = "approvals" + query({ state, cursors: [...cursors, page.next_cursor].join(",") }); } }, "older →")));
}

async function optional(promise) {
  // A part of the page that may be missing (pruned, or not this key's to read): null.
  try { return await promise; } catch (err) { if (err instanceof Stale) throw err; return { failed: err }; }
}

async function approvalDetail(id) {
  const a = await api("/v1/approvals/" + encodeURIComponent(id));
  const [asked, plan, creator] = await Promise.all([
    optional(api(`/v1/approvals/${encodeURIComponent(id)}/decision`)),
    may("plans.read") ? optional(api("/v1/plans/" + encodeURIComponent(a.plan_id))) : null,
    may("plans.read") ? optional(api(`/v1/plans/${encodeURIComponent(a.plan_id)}/creator`)) : null,
  ]);
  await learn([a.requested_by, a.decided_by, asked && asked.key_id]);
  const d = asked && !asked.failed ? asked : null;
  const detail = (d && d.detail) || {};
  const decide = may("approvals.decide");
  const actions = [];
  if (decide && a.state === "pending") {
    actions.push(el("button", { type: "button", class: "primary", id: "grant", onclick: () => grantDialog(a) }, "Grant…"));
    actions.push(el("button", { type: "button", class: "danger", id: "reject", onclick: () => rejectDialog(a) }, "Reject…"));
  }
  if (decide && ["pending", "granted"].includes(a.state)) {
    actions.push(el("button", { type: "button", id: "cancel", onclick: () => cancelDialog(a) }, a.state === "granted" ? "Withdraw the grant…" : "Cancel…"));
  }
  show(
    el("p", {}, el("a", { href: "#approvals" }, "← approvals")),
    el("h1", {}, "Approval ", el("code", {}, a.approval_id), " ", el("span", { class: "state " + a.state, id: "approval-state" }, a.state)),
    actions.length ? el("div", { class: "toolbar", id: "approval-actions" }, actions) : null,
    el("div", { class: "grid" },
      el("div", { class: "panel", id: "asked" }, el("h2", {}, "What the agent asked"), fields([
        ["tool", a.tool], ["project", a.project], ["action", a.action_id],
        ["plan", may("plans.read") ? el("a", { href: "#plans" + query({ plan_id: a.plan_id }) }, a.plan_id) : a.plan_id],
        ["asked by", el("span", { id: "asked-by" }, person(a.requested_by))], ["asked at", a.requested_at],
        ["denied with", d ? d.code : null], ["message", el("span", { id: "deny-message" }, askedMessage(a, detail.message))],
        ["decision", d && may("decisions.read") ? el("a", { href: "#decision/" + encodeURIComponent(d.decision_id) }, d.decision_id) : d ? d.decision_id : null]])),
      el("div", { class: "panel", id: "state-panel" }, el("h2", {}, "State"), fields([
        ["state", a.state], ["expires", a.expires_at], ["uses left", a.state === "pending" ? el("span", { id: "uses-left", class: "muted" }, "set by the grant") : el("span", { id: "uses-left" }, String(a.uses_left))],
        ["decided by", a.decided_by ? el("span", { id: "decided-by" }, person(a.decided_by)) : null], ["decided at", a.decided_at],
        ["note", a.note], ["reason", a.reason],
        ["allowed calls", a.decision_ids.length ? a.decision_ids.join(", ") : null],
        ["request sha256", el("code", {}, a.request_sha256)]])),
      plan ? planPanel(plan, creator) : null),
    el("h2", {}, "Arguments"), el("div", { id: "approval-args" }, json(a.request ? a.request.args : null)),
    el("h2", {}, "Context (masked as logged)"),
    selfApproved(detail.context),
    d ? el("div", { id: "approval-context" }, json(detail.context || null))
      : el("p", { class: "muted" }, asked && asked.failed ? asked.failed.message : "Not available."),
    el("h2", {}, "The bound request"), json(a.request));
}

// The deny's message is the one the agent read when it asked: "...; approval X is pending".
// Once decided, the page says what the approval is now instead of repeating "is pending".
function askedMessage(a, message) {
  const pending = `; approval ${a.approval_id} is pending`;
  if (!message || a.state === "pending" || !message.endsWith(pending)) return message || "";
  return message.slice(0, -pending.length) + `; approval ${a.approval_id} was pending then, and is ${a.state} now`;
}

// Server mode decides by a person's grant: an agent that sent metadata.human_approved
// gained nothing by it, and the approver should know it tried.
function selfApproved(context) {
  const meta = context && context.metadata;
  if (!meta || typeof meta !== "object" || !("human_approved" in meta)) return null;
  return el("p", { class: "muted", id: "self-approved" },
    "The agent sent metadata.human_approved in its context: it is not evidence. Only a grant on this page allows the call.");
}

function planPanel(plan, creator) {
  if (plan.failed) return el("div", { class: "panel" }, el("h2", {}, "Plan"), failure(plan.failed));
  const p = plan.safety_profile || {};
  const limits = [["max cost per plan", p.max_cost_per_plan], ["max total cost", p.max_total_cost]];
  return el("div", { class: "panel", id: "approval-plan" }, el("h2", {}, "Plan and ledger"), fields([
    ["profile", profileLabel(plan.name, plan.version, plan.provenance, plan.is_default)],
    ["created by", creator && creator.who ? person(creator.who.key_id) : creator && creator.key_id ? creator.key_id : null],
    ["spent", plan.ledger ? plan.ledger.spent : null], ["held", plan.ledger ? plan.ledger.held : null],
    ...limits.map(([k, v]) => [k, v === null || v === undefined ? "no limit" : v]),
    ["read only", String(plan.read_only)]]));
}

// --- asking before deciding ---------------------------------------------------------------
function dialog(id, title, body, confirmText, confirmClass, submit) {
  // A modal <dialog>: what is about to happen, the fields it takes, Back or the action.
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const form = el("form", { method: "dialog", class: "decide" },
    el("h2", {}, title), body, error,
    el("div", { class: "toolbar" },
      el("button", { type: "button", class: "back", onclick: () => box.close() }, "Back"),
      el("button", { type: "submit", class: confirmClass, id: id + "-confirm" }, confirmText)));
  const box = el("dialog", { id }, form);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.hidden = true;
    try {
      await submit(new FormData(form));
      box.close();
      box.remove();
      route();
    } catch (err) {
      if (err instanceof Stale) return;
      fill(error, err.message || String(err));
      error.hidden = false;
    }
  });
  box.addEventListener("close", () => box.remove());
  document.body.append(box);
  box.showModal();
  const first = form.querySelector("input, textarea");
  if (first) first.focus();
}

function callSummary(a) {
  return el("p", {}, `${a.tool} `, el("code", {}, JSON.stringify(a.request ? a.request.args : null)),
    ` on plan ${a.plan_id}` + (a.project ? ` (project ${a.project})` : ""));
}

function decideCall(a, what, body) {
  return request(`/v1/approvals/${encodeURIComponent(a.approval_id)}/${what}`, { method: "POST", body });
}

function grantDialog(a) {
  dialog("grant-dialog", "Grant this call?", [
    callSummary(a),
    el("p", { class: "muted" }, "The agent's same request is then allowed, as many times as the uses, until the grant expires."),
    el("label", {}, "note (optional)", el("input", { name: "note", id: "grant-note", maxlength: 2000, size: 40 })),
    el("label", {}, "expires after (seconds, 1–86400)", el("input", { name: "ttl_seconds", id: "grant-ttl", type: "number", min: 1, max: 86400, value: 900, required: true })),
    el("label", {}, "uses (1–100)", el("input", { name: "uses", id: "grant-uses", type: "number", min: 1, max: 100, value: 1, required: true })),
  ], "Grant", "primary", (data) => {
    const body = { ttl_seconds: Number(data.get("ttl_seconds")), uses: Number(data.get("uses")) };
    const note = (data.get("note") || "").trim();
    if (note) body.note = note;
    return decideCall(a, "grant", body);
  });
}

function rejectDialog(a) {
  dialog("reject-dialog", "Reject this call?", [
    callSummary(a),
    el("p", { class: "muted" }, "The same request stays rejected for the plan's life; the agent's deny names the reason."),
    el("label", {}, "reason (required)", el("textarea", { name: "reason", id: "reject-reason", maxlength: 2000, rows: 3, cols: 40, required: true })),
  ], "Reject", "danger", (data) => decideCall(a, "reject", { reason: (data.get("reason") || "").trim() }));
}

function cancelDialog(a) {
  dialog("cancel-dialog", a.state === "granted" ? "Withdraw this grant?" : "Cancel this request?", [
    callSummary(a),
    el("p", { class: "muted" }, "The approval is withdrawn: no call can use it; the agent's next call asks again."),
  ], a.state === "granted" ? "Withdraw" : "Cancel the request", "danger", () => decideCall(a, "cancel", {}));
}
