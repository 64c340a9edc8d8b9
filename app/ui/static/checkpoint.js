// The audit view's checkpoint panel (SPEC §16, docs/ui.md): the latest signed checkpoint
// of the log's head, its age, and whether it verifies (its signature, and the stored log
// at its seq: GET /v1/audit/checkpoint's `verifies`). Uses app.js's el/api/fields/failure;
// every value is rendered as text.
function checkpointAge(time) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(time)) / 1000));
  if (seconds < 120) return `${seconds} s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

function checkpointPanel() {
  const box = el("section", { id: "checkpoint" }, el("h2", {}, "Latest signed checkpoint"),
    el("p", { class: "muted" }, "Loading…"));
  (async () => {
    const none = () => box.replaceChildren(el("h2", {}, "Latest signed checkpoint"), el("p", { class: "muted", id: "checkpoint-state" },
      "No checkpoint: the log is not signed (TOOLGATE_LOG_SIGNING_KEY), or none was taken yet."));
    try {
      // The list answers 200 when there is none (the latest would be a 404 in the console).
      if (!(await api("/v1/audit/checkpoints?limit=1")).items.length) return none();
      const c = await api("/v1/audit/checkpoint");
      box.replaceChildren(el("h2", {}, "Latest signed checkpoint"),
        el("p", { class: c.verifies ? "allow" : "deny", id: "checkpoint-state" },
          c.verifies ? "The latest checkpoint verifies." : `The latest checkpoint does NOT verify: ${c.problem}`),
        c.signing_stopped ? el("p", { class: "deny", id: "checkpoint-stopped" },
          "Signing has stopped: the stored log contradicts this checkpoint (history was rewritten), so no new checkpoint is signed over it, and GET /readyz answers degraded. Compare an export with the witness's copy (toolgate audit verify --checkpoint).") : null,
        fields([["seq", c.seq], ["head hash", c.head_hash], ["signed", `${c.time} (${checkpointAge(c.time)})`],
          ["origin", c.origin], ["verifier key", c.verifier_key]]),
        el("details", {}, el("summary", {}, "signed note"), el("pre", { id: "checkpoint-note" }, c.note)));
    } catch (err) {
      if (err && err.status === 404) {
        none();
      } else if (!(err instanceof Stale)) {
        box.replaceChildren(el("h2", {}, "Latest signed checkpoint"), failure(err));
      }
    }
  })();
  return box;
}
