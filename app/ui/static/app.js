// toolgate's operators' page (SPEC §13, docs/ui.md). Plain JavaScript, no build step.
// Rules kept throughout: every value from the API is written with textContent (el() below),
// never as HTML; the key lives in this tab's sessionStorage and goes out as a bearer; the
// page asks the API for pages and aggregates only, never the whole log.
"use strict";

const KEY = "toolgate.key";
const main = document.getElementById("main");
const nav = document.getElementById("nav");
let me = null; // GET /v1/whoami: role, projects, permissions

// --- DOM, as text only ------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((n) => n !== null && n !== undefined));
}
function show(...nodes) { fill(main, ...nodes); }
function json(value) { return el("pre", {}, JSON.stringify(value, null, 2)); }
function verdict(allowed) {
  if (allowed === null || allowed === undefined) return el("span", { class: "muted" }, "—");
  return el("span", { class: allowed ? "allow" : "deny" }, allowed ? "allow" : "deny");
}
function fields(pairs) {
  return el("dl", { class: "fields" },
    pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v === null || v === undefined ? "—" : v)]));
}

// --- the API ------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e ? `${status} ${e.code}: ${e.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = e && e.code;
  }
}

// Each route() starts a new generation: an answer that arrives after the reader has moved
// on to another view is dropped (Stale), so it never replaces the view now shown.
let generation = 0;
class Stale extends Error {}

async function api(path, options = {}) {
  const asked = generation;
  const answer = await request(path, options);
  if (asked !== generation) throw new Stale(path);
  return answer;
}

async function request(path, options) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(KEY) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method: options.method || "GET", headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (r.status === 401) { signOut("The key was refused (401): sign in again."); throw new ApiError(401, null); }
  if (options.raw && r.ok) return r;
  const type = r.headers.get("content-type") || "";
  const body = type.includes("json") ? await r.json() : await r.text();
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

function failure(err) {
  if (err.status === 403) return notAllowed(err.message);
  return el("p", { class: "error", role: "alert" }, err.message || String(err));
}

// --- sign-in ------------------------------------------------------------------------------
function signInPage(message) {
  nav.replaceChildren();
  document.getElementById("who").textContent = "";
  document.getElementById("signout").hidden = true;
  const input = el("input", { type: "password", id: "key", autocomplete: "off", placeholder: "tg_…" });
  const form = el("form", { class: "signin", id: "signin", onsubmit: async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    await start();
  } },
  el("h1", {}, "Sign in"),
  el("p", { class: "muted" }, "With an API key. It is kept in this tab only (sessionStorage) and sent as a bearer to toolgate's API."),
  el("label", {}, "API key", input),
  el("button", { type: "submit", class: "primary" }, "Sign in"),
  message ? el("p", { class: "error", role: "alert" }, message) : null);
  show(form);
  input.focus();
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  me = null;
  signInPage(message);
}
document.getElementById("signout").addEventListener("click", () => signOut());

// --- views and who may see them -----------------------------------------------------------
const VIEWS = [
  { id: "overview", title: "Overview", needs: ["decisions.read"], render: overview },
  { id: "decisions", title: "Decisions", needs: ["decisions.read"], render: decisions },
  { id: "approvals", title: "Approvals", needs: ["approvals.read"], render: approvals },
  { id: "plans", title: "Plans", needs: ["plans.read"], render: plans },
  { id: "audit", title: "Audit", needs: ["audit.verify", "audit.export"], render: audit, any: true },
];
// The page is for operators: a key that can neither read the log nor decide approvals
// (an agent's) gets the "not allowed" page whatever else its role may read.
const OPERATOR = ["decisions.read", "approvals.decide", "audit.export"];

function may(permission) { return me && me.permissions.includes(permission); }
function visible(view) { return view.any ? view.needs.some(may) : view.needs.every(may); }

function notAllowed(reason) {
  return el("section", { class: "notice", id: "not-allowed", role: "alert" },
    el("h1", {}, "Not allowed"),
    el("p", {}, reason),
    el("p", { class: "muted" }, "Sign in with a key whose role may read this (docs/auth.md lists each role's permissions)."));
}

async function start() {
  if (!sessionStorage.getItem(KEY)) return signInPage();
  try {
    me = await api("/v1/whoami");
  } catch (err) {
    if (err.status !== 401) signOut(err.message);
    return;
  }
  document.getElementById("who").textContent =
    `${me.principal} · ${me.role}` + (me.projects ? ` · projects: ${me.projects.join(", ")}` : "");
  document.getElementById("signout").hidden = false;
  route();
}

function route() {
  if (!me) return;
  generation += 1;
  const [name, rest] = location.hash.replace(/^#/, "").split("/", 2);
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const usable = VIEWS.filter(visible);
  nav.replaceChildren(...usable.map((v) =>
    el("a", { href: "#" + v.id, id: "nav-" + v.id, class: (name || "").startsWith(v.id) ? "active" : "" }, v.title)));
  if (!OPERATOR.some(may)) {
    return show(notAllowed(`This key (role ${me.role}) may not use the operators' page: it needs a key that may read decisions or decide approvals (roles admin, auditor, approver).`));
  }
  if (name === "decision" && rest) return guarded("decisions", () => decisionDetail(decodeURIComponent(rest.split("?")[0])));
  const view = VIEWS.find((v) => v.id === (name || "").split("?")[0]) || usable[0];
  if (!view) return show(notAllowed(`This key (role ${me.role}) may read none of the page's views.`));
  guarded(view.id, () => view.render(params));
}

function guarded(id, render) {
  const view = VIEWS.find((v) => v.id === id);
  if (!visible(view)) {
    return show(notAllowed(`This key (role ${me.role}) may not read ${view.title.toLowerCase()} (permission ${view.needs.join(" or ")}).`));
  }
  show(el("p", { class: "muted" }, "Loading…"));
  Promise.resolve(render()).catch((err) => { if (!(err instanceof Stale)) show(failure(err)); });
}
window.addEventListener("hashchange", route);

// --- overview -------------------------------------------------------------------------------
const RANGES = { hour: [3600, "minute", 60], day: [86400, "hour", 3600], week: [604800, "hour", 3600] };

async function overview(params) {
  const range = RANGES[params.get("range")] ? params.get("range") : "day";
  const project = params.get("project") || "";
  const [span, bucket, step] = RANGES[range];
  const now = Math.floor(Date.now() / 1000);
  const since = new Date((now - span) * 1000).toISOString();
  const base = { since, project };
  const [series, byCode, byTool, byProject] = await Promise.all([
    api("/v1/decisions/stats" + query({ ...base, bucket })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "code" })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "tool" })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "project" })),
  ]);
  const go = (changes) => { location.hash = "overview" + query({ range, project, ...changes }); };
  const rangeSelect = el("select", { id: "range", onchange: (e) => go({ range: e.target.value }) },
    Object.keys(RANGES).map((r) => el("option", { value: r, selected: r === range }, "last " + r)));
  const projectSelect = el("select", { id: "project", onchange: (e) => go({ project: e.target.value }) },
    el("option", { value: "" }, "every project"),
    byProject.groups.filter((g) => g.key !== null).map((g) => el("option", { value: g.key, selected: g.key === project }, g.key)));
  const t = series.total;
  const chart = el("div", { id: "chart", class: "panel" });
  const topCodes = byCode.groups.filter((g) => g.key !== null && g.denied > 0).sort((a, b) => b.denied - a.denied).slice(0, 10);
  const topTools = byTool.groups.filter((g) => g.denied > 0).sort((a, b) => b.denied - a.denied).slice(0, 10);
  show(
    el("h1", {}, "Overview"),
    el("div", { class: "toolbar" }, el("label", {}, "Range", rangeSelect), el("label", {}, "Project", projectSelect)),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "muted" }, "decisions"), el("div", { class: "n", id: "total" }, t.count)),
      el("div", { class: "card" }, el("div", { class: "muted" }, "allowed"), el("div", { class: "n allow" }, t.allowed)),
      el("div", { class: "card" }, el("div", { class: "muted" }, "denied"), el("div", { class: "n deny" }, t.denied))),
    el("h2", {}, `Decisions per ${bucket} (UTC)`), chart,
    el("div", { class: "grid" },
      el("div", { class: "panel" }, el("h2", {}, "Top deny codes"),
        barTable("code", topCodes, (g) => "decisions" + query({ code: g.key, project, since }), "top-codes")),
      el("div", { class: "panel" }, el("h2", {}, "Top denied tools"),
        barTable("tool", topTools, (g) => "decisions" + query({ tool: g.key, allowed: "false", project, since }), "top-tools")),
      el("div", { class: "panel" }, el("h2", {}, "Per project"), projectTable(byProject.groups, since))));
  drawChart(chart, series.series || [], now - span, now, step);
}

function barTable(label, groups, link, id) {
  if (!groups.length) return el("p", { class: "muted" }, "No denies in this range.");
  const most = Math.max(...groups.map((g) => g.denied));
  return el("table", { id }, el("tr", {}, el("th", {}, label), el("th", {}, "denied"), el("th", {}, "")),
    groups.map((g) => {
      const bar = el("span", { class: "bar" });
      bar.style.width = `${Math.max(2, (100 * g.denied) / most)}%`; // CSSOM: allowed by the CSP
      return el("tr", { class: "link", onclick: () => { location.hash = link(g); } },
        el("td", {}, g.key === null ? "(none)" : g.key), el("td", {}, g.denied), el("td", { class: "barcell" }, bar));
    }));
}

function projectTable(groups, since) {
  if (!groups.length) return el("p", { class: "muted" }, "No decisions in this range.");
  return el("table", { id: "per-project" },
    el("tr", {}, el("th", {}, "project"), el("th", {}, "decisions"), el("th", {}, "allowed"), el("th", {}, "denied")),
    groups.map((g) => el("tr", { class: "link", onclick: () => { location.hash = "decisions" + query({ project: g.key || "", since }); } },
      el("td", {}, g.key === null ? "(no project)" : g.key), el("td", {}, g.count), el("td", {}, g.allowed), el("td", {}, g.denied))));
}

function drawChart(container, series, from, to, step) {
  // Every bucket of the range, empty ones as zero: the API answers only buckets with data.
  const start = Math.floor(from / step) * step;
  const xs = [], allowed = [], denied = [], index = new Map();
  for (let x = start; x <= to; x += step) { index.set(x, xs.length); xs.push(x); allowed.push(0); denied.push(0); }
  for (const s of series) {
    const i = index.get(Math.floor(Date.parse(s.bucket) / 1000));
    if (i !== undefined) { allowed[i] = s.allowed; denied[i] = s.denied; }
  }
  if (typeof uPlot === "undefined") return container.append(el("p", { class: "error" }, "The chart library did not load."));
  const width = Math.max(320, container.clientWidth - 32);
  new uPlot({
    width, height: 240, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    series: [{}, { label: "allowed", stroke: "#1a7f4b", fill: "rgba(26,127,75,.12)" },
      { label: "denied", stroke: "#c0392b", fill: "rgba(192,57,43,.12)" }],
    axes: [{}, { label: "decisions" }],
  }, [xs, allowed, denied], container);
}

// --- decisions --------------------------------------------------------------------------
const FILTERS = ["kind", "since", "until", "project", "plan_id", "tool", "allowed", "code"];
const KINDS = ["authorize", "plan", "resolve", "screen", "any"];

function utcInput(name, value) {
  // <input type=datetime-local> in UTC: the API takes RFC 3339, the page says UTC.
  const v = value ? value.replace(/Z$/, "").slice(0, 16) : "";
  return el("input", { type: "datetime-local", name, value: v });
}

async function decisions(params) {
  const filters = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) || ""]));
  // Tool calls by default; "any" lists every kind of decision (plans, resolutions, screens).
  if (!KINDS.includes(filters.kind)) filters.kind = "authorize";
  const cursors = (params.get("cursors") || "").split(",").filter(Boolean); // the pages before
  const cursor = cursors.length ? cursors[cursors.length - 1] : "";
  const pageSize = 50;
  const asked = { ...filters, kind: filters.kind === "any" ? "" : filters.kind };
  const page = await api("/v1/decisions" + query({ ...asked, limit: pageSize, cursor }));
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
  el("label", {}, "kind", el("select", { name: "kind" },
    KINDS.map((k) => el("option", { value: k, selected: filters.kind === k }, k)))),
  el("label", {}, "since (UTC)", utcInput("since", filters.since)),
  el("label", {}, "until (UTC)", utcInput("until", filters.until)),
  ...["project", "plan_id", "tool"].map((f) => el("label", {}, f, el("input", { name: f, value: filters[f], size: 14 }))),
  el("label", {}, "allowed", el("select", { name: "allowed" },
    [["", "any"], ["true", "allowed"], ["false", "denied"]].map(([v, t]) => el("option", { value: v, selected: filters.allowed === v }, t)))),
  el("label", {}, "code", el("input", { name: "code", id: "filter-code", value: filters.code, size: 18 })),
  el("button", { type: "submit", class: "primary" }, "Filter"),
  el("a", { href: "#decisions" }, "clear"));
  const pageOf = (list) => "decisions" + query({ ...filters, cursors: list.join(",") });
  show(el("h1", {}, "Decisions"), form,
    page.items.length ? el("table", { id: "decision-list" },
      el("tr", {}, ["time (UTC)", "project", "plan", "tool", "verdict", "code", "check", "ms"].map((h) => el("th", {}, h))),
      page.items.map((d) => el("tr", { class: "link", "data-id": d.decision_id, onclick: () => { location.hash = "decision/" + encodeURIComponent(d.decision_id); } },
        el("td", {}, d.created_at), el("td", {}, d.project), el("td", {}, d.plan_id), el("td", {}, d.tool),
        el("td", {}, verdict(d.allowed)), el("td", {}, d.code), el("td", {}, d.check), el("td", {}, d.latency_ms))))
      : el("p", { class: "muted", id: "no-decisions" }, "No decisions match."),
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

async function decisionDetail(id) {
  const [d, order] = await Promise.all([api("/v1/decisions/" + encodeURIComponent(id)), checkOrder()]);
  const detail = d.detail || {};
  show(
    el("p", {}, el("a", { href: "#decisions", onclick: (e) => { e.preventDefault(); history.back(); } }, "← back")),
    el("h1", {}, "Decision ", el("code", {}, d.decision_id)),
    el("div", { class: "grid" },
      el("div", { class: "panel" }, el("h2", {}, "Verdict"), fields([
        ["verdict", verdict(d.allowed)], ["code", d.code], ["error class", d.error], ["message", detail.message],
        ["time", d.created_at], ["kind", d.kind], ["project", d.project], ["plan", d.plan_id],
        ["action", d.action_id], ["tool", d.tool], ["layer", detail.layer], ["latency (ms)", d.latency_ms],
        ["key", d.key_id], ["request id", d.request_id]])),
      el("div", { class: "panel" }, el("h2", {}, "Checks"), checksList(d, order)),
      el("div", { class: "panel", id: "profile" }, el("h2", {}, "Profile"), fields([
        ["provenance", d.provenance], ["name", d.profile_name], ["version", d.profile_version]]))),
    detail.deny_details ? [el("h2", {}, "Deny details"), json(detail.deny_details)] : null,
    el("h2", {}, "Tool"), json(detail.tool || null),
    el("h2", {}, "Context (masked as logged)"), json(detail.context || null),
    detail.effective ? [el("h2", {}, "What the service knew"), json(detail.effective)] : null,
    d.shadow ? [el("h2", {}, "Shadow profile"), json(d.shadow)] : null,
    el("h2", {}, "Outcome"), d.outcome ? json(d.outcome) : el("p", { class: "muted", id: "outcome" }, "None reported."),
    el("h2", {}, "Chain"), fields([["seq", d.seq], ["hash", d.hash], ["previous", d.prev_hash]]));
}

// --- approvals ----------------------------------------------------------------------------
const STATES = ["pending", "granted", "rejected", "cancelled", "expired", "used", ""];

async function approvals(params) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : "pending";
  const cursors = (params.get("cursors") || "").split(",").filter(Boolean);
  const page = await api("/v1/approvals" + query({ state, limit: 50, cursor: cursors[cursors.length - 1] || "" }));
  const decide = may("approvals.decide");
  const reload = () => route();
  const act = async (row, what, body) => {
    try { await api(`/v1/approvals/${encodeURIComponent(row.approval_id)}/${what}`, { method: "POST", body }); reload(); }
    catch (err) { main.prepend(failure(err)); }
  };
  const actions = (a) => {
    if (!decide || !["pending", "granted"].includes(a.state)) return null;
    const reason = el("input", { placeholder: "reason", class: "reason", size: 16 });
    return el("span", {},
      a.state === "pending" ? el("button", { type: "button", class: "primary grant", onclick: () => act(a, "grant", {}) }, "Grant") : null,
      a.state === "pending" ? reason : null,
      a.state === "pending" ? el("button", { type: "button", class: "danger reject", onclick: () => {
        if (!reason.value.trim()) { reason.focus(); reason.placeholder = "a reason is required"; return; }
        act(a, "reject", { reason: reason.value.trim() });
      } }, "Reject") : null,
      el("button", { type: "button", class: "cancel", onclick: () => act(a, "cancel", {}) }, "Cancel"));
  };
  show(el("h1", {}, "Approvals"),
    el("div", { class: "toolbar" }, el("label", {}, "state", el("select", { id: "state", onchange: (e) => { location.hash = "approvals" + query({ state: e.target.value }); } },
      STATES.map((s) => el("option", { value: s, selected: s === state }, s || "any"))))),
    page.items.length ? el("table", { id: "approval-list" },
      el("tr", {}, ["requested (UTC)", "state", "project", "plan", "tool", "request", "expires", ""].map((h) => el("th", {}, h))),
      page.items.map((a) => el("tr", { "data-id": a.approval_id },
        el("td", {}, a.requested_at), el("td", {}, a.state), el("td", {}, a.project), el("td", {}, a.plan_id),
        el("td", {}, a.tool), el("td", {}, el("code", {}, JSON.stringify(a.request && a.request.args))),
        el("td", {}, a.expires_at), el("td", {}, actions(a)))))
      : el("p", { class: "muted", id: "no-approvals" }, `No ${state} approvals.`),
    el("div", { class: "pager" },
      el("button", { type: "button", disabled: !cursors.length, onclick: () => { location.hash = "approvals" + query({ state, cursors: cursors.slice(0, -1).join(",") }); } }, "← newer"),
      el("button", { type: "button", disabled: !page.next_cursor, onclick: () => { location.hash = "approvals" + query({ state, cursors: [...cursors, page.next_cursor].join(",") }); } }, "older →")));
}

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
    const plan = await api("/v1/plans/" + encodeURIComponent(id));
    return show(el("h1", {}, "Plan ", el("code", {}, plan.plan_id)), form,
      el("div", { class: "grid" },
        el("div", { class: "panel" }, el("h2", {}, "Lock"), fields([
          ["action", plan.action_id], ["project", plan.project], ["read only", String(plan.read_only)],
          ["provenance", plan.provenance], ["profile", plan.name], ["version", plan.version],
          ["default", String(plan.is_default)], ["created", plan.created_at]])),
        "ledger" in plan ? el("div", { class: "panel", id: "ledger" }, el("h2", {}, "Ledger"),
          plan.ledger ? fields([["spent", plan.ledger.spent], ["held", plan.ledger.held]]) : el("p", { class: "muted" }, "None."),
          plan.ledger && plan.ledger.steps ? json(plan.ledger.steps) : null) : null),
      el("h2", {}, "Locked safety profile"), json(plan.safety_profile),
      el("p", {}, el("a", { href: "#decisions" + query({ plan_id: plan.plan_id }) }, "this plan's decisions")));
  }
  const page = await api("/v1/plans" + query({ limit: 50, cursor }));
  show(el("h1", {}, "Plans"), form,
    el("table", { id: "plan-list" },
      el("tr", {}, ["created (UTC)", "plan", "action", "project", "profile", "read only"].map((h) => el("th", {}, h))),
      page.items.map((p) => el("tr", { class: "link", onclick: () => { location.hash = "plans" + query({ plan_id: p.plan_id }); } },
        el("td", {}, p.created_at), el("td", {}, p.plan_id), el("td", {}, p.action_id), el("td", {}, p.project),
        el("td", {}, `${p.name || "(inline)"} v${p.version}`), el("td", {}, String(p.read_only))))),
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

start();
