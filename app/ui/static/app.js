// toolgate's operators' page (SPEC §13, docs/ui.md). Plain JavaScript, no build step: this
// file (the DOM, the API, sign-in, who may see what, routing) and one file per view
// (overview.js, decisions.js, approvals.js, plans.js), classic scripts sharing one scope,
// loaded in order with `defer`; the page starts once all of them ran (DOMContentLoaded).
// Rules kept throughout: every value from the API is written with textContent (el() below),
// never as HTML; the key lives in this tab's sessionStorage and goes out as a bearer; the
// page asks the API for pages and aggregates only, never the whole log.
"use strict";

const KEY = "toolgate.key";
const main = document.getElementById("main");
const nav = document.getElementById("nav");
let me = null; // GET /v1/whoami: role, projects, permissions
// Signed in with the organisation's provider (SPEC §21, docs/auth.md): no key, the session
// is an HttpOnly cookie the page never sees; every change carries this CSRF token.
let csrf = null;

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

// The profile a plan or decision ran on, in words: a named one with its version, the
// global default (no profile configured anywhere), or an inline one at its level.
function profileLabel(name, version, provenance, isDefault) {
  if (name) return `${name} v${version}`;
  // The global level holds only a named profile: without a name it is the default.
  if (isDefault || provenance === "global") return "global default";
  return provenance ? `inline (${provenance} level)` : "inline";
}
function shortId(id) {
  return id ? el("span", { title: id }, id.length > 13 ? id.slice(0, 8) + "…" : id) : null;
}

// --- who is behind a key id ---------------------------------------------------------------
// Records, approvals and plans name keys by id; GET /v1/principals gives each key's name and
// principal (the person or service behind it), asked once per id and kept for the tab.
const WHO = new Map();
async function learn(ids) {
  const wanted = [...new Set(ids.filter((i) => i && !WHO.has(i)))];
  if (!wanted.length || !may("principals.read")) return;
  for (let i = 0; i < wanted.length; i += 100) {
    const part = wanted.slice(i, i + 100);
    const found = await api("/v1/principals?" + part.map((k) => "key_id=" + encodeURIComponent(k)).join("&"));
    for (const k of part) WHO.set(k, null);
    for (const w of found.items) WHO.set(w.key_id, w);
  }
}
function person(keyId) {
  if (!keyId) return el("span", { class: "muted" }, "—");
  const w = WHO.get(keyId);
  if (!w) return el("span", { class: "who", title: "key " + keyId }, keyId);
  return el("span", { class: "who", title: `key ${w.key_id} · role ${w.role}${w.revoked ? " · revoked" : ""}` },
    w.principal, " ", el("span", { class: "muted" }, `(key ${w.name})`));
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
  const method = options.method || "GET";
  const key = sessionStorage.getItem(KEY);
  const headers = key ? { Authorization: "Bearer " + key } : {};
  if (!key && csrf && method !== "GET") headers["X-CSRF-Token"] = csrf;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (r.status === 401) {
    signOut(key ? "The key was refused (401): sign in again." : "The session has ended: sign in again.");
    throw new ApiError(401, null);
  }
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
  // With single sign-on configured, the provider's button comes first (GET /ui/login).
  fetch("/ui/signin.json").then((r) => r.json()).then((o) => {
    if (!o.oidc) return;
    form.insertBefore(el("p", {}, el("a", { href: "/ui/login", id: "oidc-signin", class: "button primary" },
      "Sign in with your organisation")), form.children[1]);
  }).catch(() => {});
}

function signOut(message) {
  const person = me && me.person && !sessionStorage.getItem(KEY);
  if (person && !message) { // ends the session here, then at the provider when it says how
    fetch("/ui/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf || "" } })
      .then((r) => r.json()).then((o) => { if (o.end_session_url) location.assign(o.end_session_url); })
      .catch(() => {});
  }
  csrf = null;
  sessionStorage.removeItem(KEY);
  me = null;
  generation += 1; // what the last key asked for is no longer shown when it arrives
  stopRefresh();
  signInPage(message);
}
document.getElementById("signout").addEventListener("click", () => signOut());

// --- views and who may see them -----------------------------------------------------------
// Each view is rendered by a function of its own file (overview.js, ...), looked up when
// the view is opened: those files run after this one.
const VIEWS = [
  { id: "overview", title: "Overview", needs: ["decisions.read"], render: (p) => overview(p) },
  { id: "decisions", title: "Decisions", needs: ["decisions.read"], render: (p) => decisions(p) },
  { id: "approvals", title: "Approvals", needs: ["approvals.read"], render: (p) => approvals(p) },
  { id: "plans", title: "Plans", needs: ["plans.read"], render: (p) => plans(p) },
  { id: "pins", title: "Pins", needs: ["pins.read"], render: () => pins() },
  { id: "rules", title: "Rules", needs: ["rules.read"], render: (p) => rules(p) },
  { id: "audit", title: "Audit", needs: ["audit.verify", "audit.export"], render: (p) => audit(p), any: true },
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
  if (!sessionStorage.getItem(KEY)) {
    // A session from the provider's sign-in, if this browser has one: else the form.
    const options = await fetch("/ui/signin.json", { credentials: "same-origin" })
      .then((o) => o.json()).catch(() => ({}));
    if (!options.signed_in) return signInPage();
    const r = await fetch("/v1/whoami", { credentials: "same-origin" });
    if (!r.ok) return signInPage();
    me = await r.json();
    csrf = me.csrf_token || null;
  } else {
    try {
      me = await api("/v1/whoami");
    } catch (err) {
      if (err.status !== 401) signOut(err.message);
      return;
    }
  }
  document.getElementById("who").textContent =
    `${me.person ? (me.person.name || me.person.email || me.principal) : me.principal} · ${me.role}` + (me.projects ? ` · projects: ${me.projects.join(", ")}` : "");
  document.getElementById("signout").hidden = false;
  route();
}

function route() {
  if (!me) return;
  generation += 1;
  // `#approval/ID` is the page's own link; `#/approvals/ID` is the one toolgate prints in
  // deny texts (hooks, gateway): both open the approval (so do `#decision/ID`, `#/decisions/ID`).
  let [name, rest] = location.hash.replace(/^#\/?/, "").split("/", 2);
  if (rest && (name === "approvals" || name === "decisions")) name = name.slice(0, -1);
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  stopRefresh();
  const operator = OPERATOR.some(may);
  // The navigation offers only what this key may open: nothing at all to a non-operator.
  const usable = operator ? VIEWS.filter(visible) : [];
  const here = name === "decision" ? "decisions" : name === "approval" ? "approvals" : name === "rule" ? "rules" : (name || "").split("?")[0];
  nav.replaceChildren(...usable.map((v) =>
    el("a", { href: "#" + v.id, id: "nav-" + v.id, class: here === v.id ? "active" : "" }, v.title)));
  if (!operator) {
    return show(notAllowed(`This key (role ${me.role}) may not use the operators' page: it needs a key that may read decisions or decide approvals (roles admin, auditor, approver).`));
  }
  if (name === "decision" && rest) return guarded("decisions", () => decisionDetail(decodeURIComponent(rest.split("?")[0])));
  if (name === "approval" && rest) return guarded("approvals", () => approvalDetail(decodeURIComponent(rest.split("?")[0])));
  if (name === "rule" && rest) return guarded("rules", () => ruleDetail(decodeURIComponent(rest.split("?")[0])));
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

// --- refreshing a view by itself ----------------------------------------------------------
// The overview asks for its figures again every REFRESH_MS while it is shown, unless the
// reader paused it (kept for the tab). A timer belongs to one view: route() stops it.
const REFRESH_MS = 10000;
const PAUSED = "toolgate.paused";
let refreshTimer = null;
function stopRefresh() { clearTimeout(refreshTimer); refreshTimer = null; }
function refreshPaused() { return sessionStorage.getItem(PAUSED) === "1"; }
function scheduleRefresh(again) {
  stopRefresh();
  if (refreshPaused()) return;
  const asked = generation;
  refreshTimer = setTimeout(() => { if (asked === generation) rerun(again); }, REFRESH_MS);
}
function rerun(again) {
  Promise.resolve(again()).catch((err) => { if (!(err instanceof Stale)) show(failure(err)); });
}
function refreshControl(again) {
  const paused = refreshPaused();
  const time = new Date().toISOString().slice(11, 19);
  return el("span", { class: "refresh" },
    el("span", { class: "muted", id: "refreshed" }, paused ? `paused · shown ${time} UTC` : `refreshes every ${REFRESH_MS / 1000} s · shown ${time} UTC`),
    el("button", { type: "button", id: "refresh-toggle", "aria-pressed": paused ? "true" : "false", onclick: () => {
      if (refreshPaused()) { sessionStorage.removeItem(PAUSED); rerun(again); } // the figures of now
      else {
        sessionStorage.setItem(PAUSED, "1");
        stopRefresh();
        fill(document.getElementById("refreshed"), `paused · shown ${time} UTC`);
        const button = document.getElementById("refresh-toggle");
        fill(button, "Resume");
        button.setAttribute("aria-pressed", "true");
      }
    } }, paused ? "Resume" : "Pause"));
}

// Every view's file has run by now (they are deferred scripts, run in order before this).
document.addEventListener("DOMContentLoaded", start);
