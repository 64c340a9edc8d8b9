// The overview (docs/ui.md): counts over a range, the series, top deny codes and tools, per
// project, and the approvals waiting for a person; it asks again every 10 s (app.js).
"use strict";

const RANGES = { hour: [3600, "minute", 60], day: [86400, "hour", 3600], week: [604800, "hour", 3600] };

function age(iso) {
  // "4 min", "2 h 5 min", "3 d 1 h": how long something has been waiting.
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

async function overview(params) {
  const range = RANGES[params.get("range")] ? params.get("range") : "day";
  const project = params.get("project") || "";
  const [span, bucket, step] = RANGES[range];
  const now = Math.floor(Date.now() / 1000);
  const since = new Date((now - span) * 1000).toISOString();
  const base = { since, project };
  const [series, byCode, byTool, byProject, waiting] = await Promise.all([
    api("/v1/decisions/stats" + query({ ...base, bucket })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "code" })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "tool" })),
    api("/v1/decisions/stats" + query({ ...base, group_by: "project" })),
    may("approvals.read") ? api("/v1/approval-stats" + query({ project })) : null,
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
  const again = () => overview(params);
  show(
    el("h1", {}, "Overview"),
    el("div", { class: "toolbar" }, el("label", {}, "Range", rangeSelect), el("label", {}, "Project", projectSelect),
      refreshControl(again)),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "muted" }, "decisions"), el("div", { class: "n", id: "total" }, t.count)),
      el("div", { class: "card" }, el("div", { class: "muted" }, "allowed"), el("div", { class: "n allow" }, t.allowed)),
      el("div", { class: "card" }, el("div", { class: "muted" }, "denied"), el("div", { class: "n deny" }, t.denied)),
      waiting ? pendingCard(waiting) : null),
    el("h2", {}, `Decisions per ${bucket} (UTC)`), chart,
    el("div", { class: "grid" },
      el("div", { class: "panel" }, el("h2", {}, "Top deny codes"),
        barTable("code", topCodes, (g) => "decisions" + query({ code: g.key, project, since }), "top-codes")),
      el("div", { class: "panel" }, el("h2", {}, "Top denied tools"),
        barTable("tool", topTools, (g) => "decisions" + query({ tool: g.key, allowed: "false", project, since }), "top-tools")),
      el("div", { class: "panel" }, el("h2", {}, "Per project"), projectTable(byProject.groups, since))));
  drawChart(chart, series.series || [], now - span, now, step);
  scheduleRefresh(again);
}

function pendingCard(waiting) {
  // Approvals waiting now (not over the range): a person is holding an agent up.
  return el("a", { class: "card link" + (waiting.pending ? " waiting" : ""), id: "pending", href: "#approvals" },
    el("div", { class: "muted" }, "approvals pending"),
    el("div", { class: "n", id: "pending-count" }, waiting.pending),
    el("div", { class: "muted", id: "pending-oldest" },
      waiting.oldest_requested_at ? `oldest waiting ${age(waiting.oldest_requested_at)}` : "none waiting"));
}

function barTable(label, groups, link, id) {
  if (!groups.length) return el("p", { class: "muted" }, "No denies in this range.");
  const most = Math.max(...groups.map((g) => g.denied));
  return el("table", { id, class: "bars" }, el("tr", {}, el("th", {}, label), el("th", {}, "denied"), el("th", {}, "")),
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
