// Plans (a plan's lock, its ledger and who created it) and the audit view (docs/ui.md).
"use strict";

// --- plans --------------------------------------------------------------------------------
async function plans(params) {
  const id = params.get("plan_id") || "";
  const cursor = params.get("cursor") || "";
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    location.hash = "plans" + query({ plan_id: new FormData(e.target).get("plan_id").trim() });
  } }, el("label", {}, "plan id", el("input", { name: "plan_id", id: "plan-id", value: id, size: 40 })),
  el("button", { type: "submit", class: "primary" }, "Show"));
  if (id) {
    const [plan, creator] = await Promise.all([api("/v1/plans/" + encodeURIComponent(id)),
      optional(api(`/v1/plans/${encodeURIComponent(id)}/creator`))]);
    if (creator && creator.who) await learn([creator.who.key_id]);
    return show(el("h1", {}, "Plan ", el("code", {}, plan.plan_id)), form,
      el("div", { class: "grid" },
        el("div", { class: "panel", id: "lock" }, el("h2", {}, "Lock"), fields([
          ["action", plan.action_id], ["project", plan.project], ["read only", String(plan.read_only)],
          ["profile", profileLabel(plan.name, plan.version, plan.provenance, plan.is_default)],
          ["provenance", plan.provenance], ["created", plan.created_at],
          ["created by", el("span", { id: "plan-creator" }, creator && creator.who ? person(creator.who.key_id)
            : creator && creator.key_id ? creator.key_id : el("span", { class: "muted" }, "not in the log"))]])),
        "ledger" in plan ? el("div", { class: "panel", id: "ledger" }, el("h2", {}, "Ledger"),
          plan.ledger ? fields([["spent", plan.ledger.spent], ["held", plan.ledger.held],
            ["max cost per plan", plan.safety_profile.max_cost_per_plan ?? "no limit"],
            ["max total cost (project)", plan.safety_profile.max_total_cost ?? "no limit"]]) : el("p", { class: "muted" }, "None."),
          plan.ledger && plan.ledger.steps ? json(plan.ledger.steps) : null) : null),
      el("h2", {}, "Locked safety profile"), json(plan.safety_profile),
      may("decisions.read") ? el("p", {}, el("a", { href: "#decisions" + query({ plan_id: plan.plan_id }) }, "this plan's decisions")) : null);
  }
  const page = await api("/v1/plans" + query({ limit: 50, cursor }));
  show(el("h1", {}, "Plans"), form,
    el("table", { id: "plan-list" },
      el("tr", {}, ["created (UTC)", "plan", "action", "project", "profile", "read only"].map((h) => el("th", {}, h))),
      page.items.map((p) => el("tr", { class: "link", onclick: () => { location.hash = "plans" + query({ plan_id: p.plan_id }); } },
        el("td", {}, p.created_at), el("td", {}, p.plan_id), el("td", {}, p.action_id), el("td", {}, p.project),
        el("td", {}, profileLabel(p.name, p.version, p.provenance, p.is_default)), el("td", {}, String(p.read_only))))),
    el("div", { class: "pager" }, el("button", { type: "button", disabled: !page.next_cursor, onclick: () => { location.hash = "plans" + query({ cursor: page.next_cursor }); } }, "older →")));
}

// --- audit --------------------------------------------------------------------------------
async function audit() {
  const out = el("div", { id: "verify-result" });
  const range = () => {
    const v = (name) => { const x = document.querySelector(`#audit-range [name=${name}]`).value; return x ? x + ":00Z" : ""; };
    return { since: v("since"), until: v("until") };
  };
  const verify = async () => {
    out.replaceChildren(el("p", { class: "muted" }, "Verifying…"));
    try {
      const r = await api("/v1/audit/verify" + query(range()));
      fill(out, el("p", { class: r.ok ? "allow" : "deny", id: "chain-state" }, r.ok ? "The chain verifies." : "The chain does NOT verify."),
        fields([["records checked", r.checked], ["head", r.head]]), r.first_bad ? [el("h2", {}, "First bad record"), json(r.first_bad)] : null);
    } catch (err) { out.replaceChildren(failure(err)); }
  };
  const exportLink = el("span", {});
  const exportRange = async (format) => {
    exportLink.replaceChildren(el("span", { class: "muted" }, "Exporting…"));
    try {
      const r = await api("/v1/audit/export" + query({ ...range(), format }), { raw: true });
      const url = URL.createObjectURL(await r.blob());
      exportLink.replaceChildren(el("a", { href: url, download: `toolgate-audit.${format}` }, `download toolgate-audit.${format}`));
    } catch (err) { exportLink.replaceChildren(failure(err)); }
  };
  show(el("h1", {}, "Audit"),
    el("p", { class: "muted" }, "A range keeps the work bounded: verifying or exporting the whole log reads every record."),
    el("form", { class: "filters", id: "audit-range", onsubmit: (e) => e.preventDefault() },
      el("label", {}, "since (UTC)", utcInput("since", "")), el("label", {}, "until (UTC)", utcInput("until", ""))),
    el("div", { class: "toolbar" },
      may("audit.verify") ? el("button", { type: "button", class: "primary", id: "verify", onclick: verify }, "Verify the chain")
        : el("span", { class: "muted" }, "Verifying needs an unscoped key (projects: all)."),
      may("audit.export") ? [el("button", { type: "button", onclick: () => exportRange("jsonl") }, "Export JSONL"),
        el("button", { type: "button", onclick: () => exportRange("csv") }, "Export CSV")] : null,
      exportLink),
    out,
    may("audit.checkpoints") ? checkpointPanel() : null);  // static/checkpoint.js
}
