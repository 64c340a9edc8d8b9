// The decision list and one decision (docs/ui.md). Every kind of record can be listed:
// decisions (authorize, plan, resolve, screen) and the records about them (approval,
// outcome, replay, config).
"use strict";

const FILTERS = ["kind", "since", "until", "project", "plan_id", "tool", "allowed", "code", "shadow_changed", "rule"];
const KINDS = ["authorize", "plan", "resolve", "screen", "approval", "outcome", "replay", "config", "any"];
const DECISION_KINDS = ["authorize", "plan", "resolve", "screen"];

function utcInput(name, value) {
  // <input type=datetime-local> in UTC: the API takes RFC 3339, the page says UTC.
  const v = value ? value.replace(/Z$/, "").slice(0, 16) : "";
  return el("input", { type: "datetime-local", name, value: v });
}

function summary(d) {
  // What a record says, in a word or two: a decision's verdict, or what the record is of.
  const detail = d.detail || {};
  if (d.allowed !== null && d.allowed !== undefined) return verdict(d.allowed);
  if (d.kind === "approval") return `approval ${detail.event || ""}`.trim();
  if (d.kind === "outcome") return `outcome ${d.code || ""}`.trim();
  if (d.kind === "config") return [detail.operation, detail.resource, detail.name].filter(Boolean).join(" ");
  if (d.kind === "replay" && detail.result) return `replay: ${detail.result.changed} of ${detail.result.checked} changed`;
  return d.kind;
}

function outcomeCell(d, outcome) {
  if (d.kind !== "authorize" || !d.allowed) return null;
  if (!outcome) return el("span", { class: "muted" }, "not reported");
  const good = outcome.status === "succeeded" && !outcome.unverified && !outcome.args_mismatch;
  const text = outcome.status + (outcome.unverified ? " (unverified)" : "") + (outcome.args_mismatch ? " (other args)" : "");
  return el("span", { class: good ? "allow" : "deny" }, text);
}

function costCell(d, outcome) {
  if (outcome) return outcome.cost;
  const estimate = d.detail && d.detail.context && d.detail.context.estimated_cost;
  if (d.kind === "authorize" && d.allowed && estimate !== null && estimate !== undefined) {
    return el("span", { class: "muted", title: "estimated_cost, held until the outcome is reported" }, `held ${estimate}`);
  }
  return null;
}

async function decisions(params) {
  const filters = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) || ""]));
  // Tool calls by default; "any" lists every kind of decision (plans, resolutions, screens).
  if (!KINDS.includes(filters.kind)) filters.kind = "authorize";
  if (!["", "true", "false"].includes(filters.shadow_changed)) filters.shadow_changed = "";
  const cursors = (params.get("cursors") || "").split(",").filter(Boolean); // the pages before
  const cursor = cursors.length ? cursors[cursors.length - 1] : "";
  const pageSize = 50;
  const asked = { ...filters, kind: filters.kind === "any" ? "" : filters.kind };
  const page = await api("/v1/decisions" + query({ ...asked, limit: pageSize, cursor }));
  const allowedIds = page.items.filter((d) => d.kind === "authorize" && d.allowed).map((d) => d.decision_id);
  const [reported] = await Promise.all([
    allowedIds.length ? api("/v1/outcomes?" + allowedIds.map((i) => "decision_id=" + encodeURIComponent(i)).join("&")) : { items: {} },
    learn(page.items.map((d) => d.key_id)),
  ]);
  const form = el("form", { class: "filters", id: "filters", onsubmit: (e) => {
    e.preventDefault();
    const data = new FormData(e.target);
    const next = {};
    for (const f of FILTERS) {
      let v = (data.get(f) || "").trim();
      if (v && (f === "since" || f === "until")) v = v.length === 16 ? v + ":00Z" : v + "Z";
      next[f] = v;
    }
    location.hash = "decisions" + query(next);
  } },
  el("label", {}, "kind", el("select", { name: "kind", id: "filter-kind" },
    KINDS.map((k) => el("option", { value: k, selected: filters.kind === k }, k === "any" ? "any decision" : k)))),
  el("label", {}, "since (UTC)", utcInput("since", filters.since)),
  el("label", {}, "until (UTC)", utcInput("until", filters.until)),
  ...["project", "plan_id", "tool"].map((f) => el("label", {}, f, el("input", { name: f, value: filters[f], size: 14 }))),
  el("label", {}, "allowed", el("select", { name: "allowed" },
    [["", "any"], ["true", "allowed"], ["false", "denied"]].map(([v, t]) => el("option", { value: v, selected: filters.allowed === v }, t)))),
  el("label", {}, "code", el("input", { name: "code", id: "filter-code", value: filters.code, size: 18 })),
  el("label", {}, "shadow", el("select", { name: "shadow_changed", id: "filter-shadow" },
    [["", "any"], ["true", "differs"], ["false", "agrees"]].map(([v, t]) => el("option", { value: v, selected: filters.shadow_changed === v }, t)))),
  el("label", {}, "rule", el("input", { name: "rule", id: "filter-rule", value: filters.rule, size: 14 })),
  el("button", { type: "submit", class: "primary" }, "Filter"),
  el("a", { href: "#decisions" }, "clear"));
  const pageOf = (list) => "decisions" + query({ ...filters, cursors: list.join(",") });
  show(el("h1", {}, "Decisions"), form,
    page.items.length ? el("table", { id: "decision-list" },
      el("tr", {}, ["time (UTC)", "kind", "project", "plan", "tool", "verdict", "code", "outcome", "cost", "by", "ms"].map((h) => el("th", {}, h))),
      page.items.map((d) => {
        const outcome = reported.items[d.decision_id];
        return el("tr", { class: "link", "data-id": d.decision_id, onclick: () => { location.hash = "decision/" + encodeURIComponent(d.decision_id); } },
          el("td", {}, d.created_at), el("td", {}, d.kind), el("td", {}, d.project), el("td", {}, shortId(d.plan_id)), el("td", {}, d.tool),
          el("td", {}, summary(d)), el("td", {}, d.code), el("td", {}, outcomeCell(d, outcome)), el("td", {}, costCell(d, outcome)),
          el("td", {}, person(d.key_id)), el("td", {}, d.latency_ms));
      }))
      : el("p", { class: "muted", id: "no-decisions" }, "No records match."),
    el("div", { class: "pager" },
      el("button", { type: "button", disabled: !cursors.length, onclick: () => { location.hash = pageOf(cursors.slice(0, -1)); } }, "← newer"),
      el("span", { class: "muted" }, `page ${cursors.length + 1}`),
      el("button", { type: "button", id: "older", disabled: !page.next_cursor, onclick: () => { location.hash = pageOf([...cursors, page.next_cursor]); } }, "older →")));
}

let CHECKS = null;
async function checkOrder() {
  if (!CHECKS) CHECKS = await (await fetch("/ui/checks.json")).json();
  return CHECKS;
}

function checksList(d, order) {
  // The checks of the decision's layer in the order they run: the first failing one
  // decides, so those before it passed and those after it did not run.
  const layer = (d.detail && d.detail.layer) || "runtime";
  const specs = order.layers[layer] || [];
  if (d.allowed === null) return el("p", { class: "muted" }, "Not a check decision.");
  if (d.check && !specs.some((s) => s.name === d.check)) {
    return el("ol", { class: "checks", id: "checks" }, el("li", { class: "denied" }, `${d.check}: denied (${d.code})`));
  }
  let seen = false;
  return el("ol", { class: "checks", id: "checks" }, specs.map((s) => {
    if (seen) return el("li", { class: "skipped" }, `${s.name}: not run`);
    if (s.name === d.check) { seen = true; return el("li", { class: "denied" }, `${s.name}: denied (${d.code})`); }
    return el("li", { class: "passed" }, `${s.name}: passed`);
  }));
}

function shadowPanel(d) {
  // SPEC §12: the same call under the project's shadow profile, not enforced.
  const s = d.shadow;
  const differs = s.allowed !== d.allowed || (s.code || null) !== (d.code || null);
  return el("div", { class: "panel", id: "shadow" }, el("h2", {}, "Shadow profile"), fields([
    ["profile", `${s.profile} v${s.version}`],
    ["would answer", el("span", {}, verdict(s.allowed), s.code ? ` (${s.code})` : "")],
    ["the answer", el("span", {}, verdict(d.allowed), d.code ? ` (${d.code})` : "")],
    ["", el("span", { class: differs ? "deny" : "muted", id: "shadow-differs" }, differs ? "differs from the answer" : "agrees with the answer")]]));
}

async function decisionDetail(id) {
  const [d, order] = await Promise.all([api("/v1/decisions/" + encodeURIComponent(id)), checkOrder()]);
  await learn([d.key_id]);
  const detail = d.detail || {};
  const decision = DECISION_KINDS.includes(d.kind);
  show(
    el("p", {}, el("a", { href: "#decisions", onclick: (e) => { e.preventDefault(); history.back(); } }, "← back")),
    el("h1", {}, decision ? "Decision " : `Record (${d.kind}) `, el("code", {}, d.decision_id)),
    el("div", { class: "grid" },
      el("div", { class: "panel" }, el("h2", {}, decision ? "Verdict" : "Record"), fields([
        ["verdict", summary(d)], ["code", d.code], ["error class", d.error], ["message", detail.message],
        ["time", d.created_at], ["kind", d.kind], ["project", d.project], ["plan", d.plan_id],
        ["action", d.action_id], ["tool", d.tool],
        // A coding agent's hook decision names the agent (claude-code, gemini-cli, ...).
        ...(detail.agent ? [["agent", el("span", { id: "decision-agent" }, String(detail.agent))]] : []),
        ["layer", detail.layer], ["latency (ms)", d.latency_ms],
        ["by", el("span", { id: "decision-by" }, person(d.key_id))], ["key id", d.key_id], ["request id", d.request_id]])),
      decision ? el("div", { class: "panel" }, el("h2", {}, "Checks"), checksList(d, order)) : null,
      decision ? el("div", { class: "panel", id: "profile" }, el("h2", {}, "Profile"), fields([
        ["profile", profileLabel(d.profile_name, d.profile_version, d.provenance, detail.is_default)],
        ["provenance", d.provenance], ["name", d.profile_name], ["version", d.profile_version]])) : null,
      d.shadow ? shadowPanel(d) : null,
      rulesPanel(d)),
    detail.deny_details ? [el("h2", {}, "Deny details"), json(detail.deny_details)] : null,
    decision ? [el("h2", {}, "Tool"), json(detail.tool || null),
      el("h2", {}, "Context (masked as logged)"), json(detail.context || null)] : [el("h2", {}, "Detail"), json(detail)],
    detail.effective ? [el("h2", {}, "What the service knew"), json(detail.effective)] : null,
    d.kind === "authorize" ? [el("h2", {}, "Outcome"), d.outcome ? json(d.outcome) : el("p", { class: "muted", id: "outcome" }, "None reported.")] : null,
    el("h2", {}, "Chain"), fields([["seq", d.seq], ["hash", d.hash], ["previous", d.prev_hash]]));
}
