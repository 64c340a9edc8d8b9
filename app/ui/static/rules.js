// Call rules (SPEC §18, docs/rules.md): the list, and one rule with the decisions it
// matched (GET /v1/decisions?rule=ID). Read-only: rules are written through the API or
// `toolgate apply`.
"use strict";

function ruleConditions(r) {
  const when = r.when || {};
  const parts = [];
  for (const key of ["command", "paths", "domains"]) {
    if (when[key]) parts.push(`${key}: ${when[key].join(", ")}`);
  }
  if (when.args) parts.push("args: " + Object.entries(when.args).map(([k, v]) => `${k}=${v}`).join(", "));
  if (when.expr) parts.push(`expr: ${when.expr}`);
  return parts.length ? parts.join("; ") : "every call";
}

function ruleLink(id) {
  return el("a", { href: "#rule/" + encodeURIComponent(id) }, id);
}

async function rules() {
  const page = await api("/v1/rules");
  const rows = page.items.map((r) => el("tr", { class: "rule-row" },
    el("td", {}, ruleLink(r.rule_id)),
    el("td", {}, r.project || el("span", { class: "muted" }, "global")),
    el("td", {}, r.tools.join(", ")),
    el("td", { class: r.effect === "deny" ? "deny" : "" }, r.effect),
    el("td", { class: r.mode === "shadow" ? "muted" : "" }, r.mode),
    el("td", {}, ruleConditions(r)),
    el("td", {}, "v" + r.version)));
  show(
    el("h1", {}, "Rules"),
    el("p", { class: "muted" }, "Evaluated before check 1, global and project rules together (docs/rules.md)."),
    page.items.length
      ? el("table", { id: "rules" }, el("thead", {}, el("tr", {},
          ...["rule", "project", "tools", "effect", "mode", "when", "version"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))
      : el("p", { class: "muted", id: "no-rules" }, "No rule is defined: decisions are made on the registry and the profiles alone."));
}

async function ruleDetail(id) {
  const r = await api("/v1/rules/" + encodeURIComponent(id));
  const matched = may("decisions.read")
    ? await api("/v1/decisions" + query({ rule: id, limit: 50 }))
    : null;
  show(
    el("p", {}, el("a", { href: "#rules" }, "← rules")),
    el("h1", {}, "Rule ", el("code", {}, r.rule_id)),
    el("div", { class: "panel" }, fields([
      ["effect", r.effect], ["mode", r.mode], ["project", r.project || "global"],
      ["tools", r.tools.join(", ")], ["when", ruleConditions(r)],
      ["message", r.message], ["version", r.version], ["updated", r.updated_at]])),
    r.capability ? [el("h2", {}, "Capability of the calls it classifies"), json(r.capability)] : null,
    el("h2", {}, "Decisions it matched"),
    matched === null
      ? el("p", { class: "muted" }, "This key may not read decisions.")
      : matched.items.length
        ? el("table", { id: "rule-decisions" }, el("tbody", {}, matched.items.map((d) => {
            const mine = ((d.detail && d.detail.rules) || []).find((m) => m.id === id) || {};
            return el("tr", {},
              el("td", {}, el("a", { href: "#decision/" + encodeURIComponent(d.decision_id) }, shortId(d.decision_id))),
              el("td", {}, d.created_at), el("td", {}, d.tool),
              el("td", {}, verdict(d.allowed), d.code ? ` (${d.code})` : ""),
              el("td", {}, mine.matched || ""));
          })))
        : el("p", { class: "muted", id: "rule-no-decisions" }, "None yet."));
}

function rulesPanel(d) {
  // Every rule that matched this call, shadow ones included (detail.rules).
  const matched = (d.detail && d.detail.rules) || [];
  if (!matched.length) return null;
  return el("div", { class: "panel", id: "decision-rules" }, el("h2", {}, "Rules"),
    el("ul", {}, matched.map((m) => el("li", {}, ruleLink(m.id), ` v${m.version}: ${m.effect}`,
      m.mode === "shadow" ? el("span", { class: "muted" }, " (shadow, not applied)") : null,
      ` — ${m.matched}`))));
}
