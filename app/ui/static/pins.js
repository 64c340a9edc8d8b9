// The gateway's tool pins (SPEC §19, docs/gateway.md "Tool pinning"): every tool a gateway
// has seen, and for each one whose definition changed (or that waits for approval) the
// pinned and the new definition side by side, with an Accept button for admins
// (PUT /v1/gateway/pins/{server}/{tool} with the new digest). Everything is text (el()).
"use strict";

const PIN_FIELDS = ["description", "inputSchema", "outputSchema", "annotations"];

function pinPath(p) {
  return "/v1/gateway/pins/" + encodeURIComponent(p.server) + "/" + encodeURIComponent(p.tool);
}

function pinState(status) {
  const shown = { pinned: "pinned", changed: "changed", pending: "waits for approval" }[status] || status;
  return el("span", { class: "state " + (status === "pinned" ? "granted" : status === "changed" ? "rejected" : "pending") }, shown);
}

// One side of the comparison: each field as text; a field that differs from the other side
// is marked, so a reviewer sees at once what the upstream changed.
function pinSide(title, digest, definition, other, side) {
  const rows = PIN_FIELDS.map((f) => {
    const value = definition ? definition[f] : undefined;
    const text = value === undefined ? "(unknown)" : value === null ? "—" :
      typeof value === "string" ? value : JSON.stringify(value, null, 2);
    const differs = other !== undefined && JSON.stringify((other || {})[f]) !== JSON.stringify(value);
    return [el("dt", {}, f), el("dd", { class: differs ? "pin-changed" : "" },
      f === "description" ? el("p", { class: "pin-text", "data-field": f }, text) : el("pre", { "data-field": f }, text))];
  });
  return el("div", { class: "panel pin-side " + side },
    el("h2", {}, title, " ", el("code", { title: digest || "" }, digest ? digest.slice(0, 12) : "none")),
    definition === null && side === "pinned"
      ? el("p", { class: "muted" }, "Pinned by digest only: the definition was not given.")
      : el("dl", { class: "fields" }, rows.flat()));
}

function pinReview(p) {
  const seen = p.seen;
  const pinned = p.digest ? p.definition : undefined;
  const accept = may("pins.write")
    ? el("button", { type: "button", class: "primary pin-accept", onclick: async (e) => {
        e.target.disabled = true;
        try {
          await api(pinPath(p), { method: "PUT", body: { digest: seen.digest } });
          await pins();
        } catch (err) {
          if (!(err instanceof Stale)) { e.target.disabled = false; e.target.after(failure(err)); }
        }
      } }, p.status === "pending" ? "Approve this definition" : "Accept the new definition")
    : el("p", { class: "muted" }, "An admin can accept it (this key may not change pins).");
  return el("section", { class: "panel pin-review", id: `pin-${p.server}.${p.tool}` },
    el("h2", {}, el("code", {}, `${p.server}.${p.tool}`), " ", pinState(p.status)),
    el("p", { class: "muted" }, p.status === "pending"
      ? "Under pin: approve this tool is hidden and its calls are denied until it is pinned."
      : `Changed since it was pinned: hidden from tools/list and its calls denied (tool_not_activated) until the change is accepted. Seen ${seen.at ? seen.at.replace("T", " ").slice(0, 19) + " UTC" : ""}.`),
    el("div", { class: "grid pin-compare" },
      p.status === "pending" ? null : pinSide("Pinned", p.digest, pinned, seen.definition, "pinned"),
      pinSide(p.status === "pending" ? "Seen" : "New", seen.digest, seen.definition,
        p.status === "pending" ? undefined : pinned, "seen")),
    el("div", { class: "toolbar" }, accept));
}

async function pins() {
  const page = await api("/v1/gateway/pins");
  const review = page.items.filter((p) => p.seen);
  const rows = page.items.map((p) => el("tr", { class: "pin-row" },
    el("td", {}, el("code", {}, `${p.server}.${p.tool}`)),
    el("td", {}, pinState(p.status)),
    el("td", {}, p.digest ? el("code", { title: p.digest }, p.digest.slice(0, 12)) : el("span", { class: "muted" }, "—")),
    el("td", {}, p.pinned_by === "first_use" ? "first use" : person(p.pinned_by)),
    el("td", {}, p.updated_at.replace("T", " ").slice(0, 19))));
  await learn(page.items.map((p) => p.pinned_by).filter((k) => k && k !== "first_use"));
  show(
    el("h1", {}, "Pins of the gateway's tool definitions"),
    el("p", { class: "muted" }, "Each MCP tool a gateway has seen, pinned to the SHA-256 of its definition (docs/gateway.md). A tool whose definition no longer matches is left out of the gateway's list and its calls are denied until the change is accepted."),
    review.length
      ? el("div", { id: "pin-reviews" }, el("h2", {}, `To review (${review.length})`), review.map(pinReview))
      : el("p", { id: "no-pin-changes" }, "No pending change: every tool matches its pin."),
    page.items.length
      ? el("table", { id: "pins" }, el("thead", {}, el("tr", {},
          ...["tool", "status", "pinned digest", "pinned by", "updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))
      : el("p", { class: "muted", id: "no-pins" }, "No gateway has reported a tool yet."));
}
