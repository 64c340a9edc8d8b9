"""Prometheus metrics (SPEC §13, docs/operations.md): the definitions, a cheap per-process
tally for what happens on every request, and the exposition.

Every decision and every request passes through here, so the hot path only adds to plain
dicts (`Tally`: one dict update per request, about 0.1 µs); `Tally.flush`, about once a
second and before each scrape, moves those counts into prometheus-client's values. Under
`toolgate serve` (any number of workers) prometheus-client runs in multiprocess mode:
serve points PROMETHEUS_MULTIPROC_DIR at a fresh private directory (and removes it at the
end), every process (the workers, the decision log's writers) writes its values into its
own file there, and a scrape sums them all. Without that variable (tests, another ASGI
server with one process) the values are this process's own.

Labels never take a client-chosen value without a bound: `code` is one of the deny table's
codes (anything else is "other"), `route` a route's template ("unmatched" otherwise),
`status` an HTTP status, and `tool` and `project` the first TOOLGATE_METRICS_MAX_TOOLS /
_MAX_PROJECTS names each process sees, then "other".
"""

from __future__ import annotations

import os
from bisect import bisect_left
from operator import itemgetter
from typing import Any

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Seconds. The decision's own time in the service (the record's latency_ms): tens of µs
# from memory, milliseconds when the plan or registry is read first.
DECISION_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                    0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_MS_BOUNDS = tuple(b * 1000 for b in DECISION_BUCKETS)  # the tally bins latency_ms

_KEY = itemgetter("allowed", "code", "project", "tool")
HOT_ROUTE = "/v1/authorize-tool"  # the hot route's 200s are counted in Tally.hot_ok

_metrics: dict[str, Any] = {}
_registry: Any = None


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def _definitions() -> dict[str, Any]:
    """The metrics, made on first use: prometheus-client picks its value class (one file
    per process, or memory) from the environment when a value is made."""
    if _metrics:
        return _metrics
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values

    global _registry
    if multiprocess_dir() is not None and values.ValueClass is values.MutexValue:
        values.ValueClass = values.get_value_class()  # imported before serve set the dir
    registry = _registry = CollectorRegistry(auto_describe=True)
    _metrics.update(
        decisions=Counter("toolgate_decisions", "Authorize decisions recorded (or handed "
                          "to the decision log), by outcome and deny code",
                          ["allowed", "code"], registry=registry),
        by_tool=Counter("toolgate_tool_decisions", "Authorize decisions by tool (the first "
                        "TOOLGATE_METRICS_MAX_TOOLS tools a process sees, then 'other')",
                        ["tool", "allowed"], registry=registry),
        by_project=Counter("toolgate_project_decisions", "Authorize decisions by project "
                           "('' for stateless requests; capped like tools)",
                           ["project", "allowed"], registry=registry),
        decision_seconds=Histogram("toolgate_decision_seconds", "Time to decide, in the "
                                   "service (the record's latency_ms)",
                                   buckets=DECISION_BUCKETS, registry=registry),
        commit_seconds=Histogram("toolgate_log_commit_seconds", "Decision log group "
                                 "commits, in the writer", buckets=COMMIT_BUCKETS,
                                 registry=registry),
        batch_records=Histogram("toolgate_log_batch_records", "Records per decision log "
                                "commit", buckets=BATCH_BUCKETS, registry=registry),
        queue_depth=Gauge("toolgate_log_queue_depth", "Decision records handed to the "
                          "writer and not yet committed (all workers)",
                          multiprocess_mode="livesum", registry=registry),
        approvals_pending=Gauge("toolgate_approvals_pending", "Approvals waiting for a "
                                "person (read at scrape time)",
                                multiprocess_mode="mostrecent", registry=registry),
        approval_waits=Gauge("toolgate_approval_waits", "Requests waiting on an approval "
                             "(GET /v1/approvals/{id}?wait=S) now (all workers)",
                             multiprocess_mode="livesum", registry=registry),
        http=Counter("toolgate_http_requests", "HTTP answers by route template and status",
                     ["route", "status"], registry=registry),
        storage_errors=Counter("toolgate_storage_errors", "Requests answered 503 "
                               "storage_unavailable (the database did not answer)",
                               registry=registry),
    )
    return _metrics


def metric(name: str) -> Any:
    return _definitions()[name]


def exposition() -> tuple[bytes, str]:
    """The scrape: (body, content type). Multiprocess: every process's files summed."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    _definitions()
    folder = multiprocess_dir()
    if folder is None:
        return generate_latest(_registry), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=folder)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def process_exited() -> None:
    """This process's live gauges stop counting (a worker's clean exit)."""
    folder = multiprocess_dir()
    if folder is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), folder)


def storage_error() -> None:
    metric("storage_errors").inc()


def log_commit(seconds: float, records: int) -> None:
    """One group commit of the decision log (the writer's loop): not per request."""
    metric("commit_seconds").observe(seconds)
    metric("batch_records").observe(records)


class Tally:
    """What happened since the last flush, in plain dicts (the hot path's share)."""

    __slots__ = ("decisions", "latency", "latency_sum", "http", "hot_ok", "max_tools",
                 "max_projects", "_tools", "_projects", "_known_codes")

    def __init__(self, *, max_tools: int = 50, max_projects: int = 50,
                 codes: frozenset[str] = frozenset()) -> None:
        # (allowed, code, project, tool) -> count
        self.decisions: dict[tuple[bool, str | None, str | None, str], int] = {}
        self.latency = [0] * (len(_MS_BOUNDS) + 1)  # the last: past the largest bound
        self.latency_sum = 0.0  # ms
        self.http: dict[tuple[str, int], int] = {}
        # The hot route's 200 answers, by far the most frequent: an integer is cheaper to
        # add to than a dict (the HTTP protocol's hot route adds here; request() for others).
        self.hot_ok = 0
        self.max_tools, self.max_projects = max_tools, max_projects
        self._tools: set[str] = set()
        self._projects: set[str] = set()
        self._known_codes = codes

    def records(self, records: list[dict[str, Any]]) -> None:
        """Decision records as they are handed to the decision log."""
        decisions, latency = self.decisions, self.latency
        for record in records:
            try:  # counting must never stop a decision's recording
                key = _KEY(record)  # (allowed, code, project, tool), in C
                decisions[key] = decisions.get(key, 0) + 1
                ms = record["latency_ms"]
                latency[bisect_left(_MS_BOUNDS, ms)] += 1
                self.latency_sum += ms
            except Exception:  # a record without these fields (tests'), or not numbers
                pass

    def request(self, route: str, status: int) -> None:
        key = (route, status)
        http = self.http
        http[key] = http.get(key, 0) + 1

    def flush(self) -> None:
        """Add what was tallied to the metrics (this process's values), and start again."""
        if not (self.decisions or self.http or self.latency_sum or self.hot_ok):
            return
        m = _definitions()
        decisions, self.decisions = self.decisions, {}
        http, self.http = self.http, {}
        hot_ok, self.hot_ok = self.hot_ok, 0
        if hot_ok:
            _add(http, (HOT_ROUTE, 200), hot_ok)
        latency, self.latency = self.latency, [0] * (len(_MS_BOUNDS) + 1)
        latency_sum, self.latency_sum = self.latency_sum, 0.0
        outcome: dict[tuple[str, str], int] = {}
        tools: dict[tuple[str, str], int] = {}
        projects: dict[tuple[str, str], int] = {}
        for (allowed, code, project, tool), n in decisions.items():
            verdict = "true" if allowed is True else "false"
            label = "none" if code is None else code if code in self._known_codes else "other"
            _add(outcome, (verdict, label), n)
            _add(tools, (self._capped(self._tools, self.max_tools, tool), verdict), n)
            _add(projects, (self._capped(self._projects, self.max_projects, project),
                            verdict), n)
        for labels, n in outcome.items():
            m["decisions"].labels(*labels).inc(n)
        for labels, n in tools.items():
            m["by_tool"].labels(*labels).inc(n)
        for labels, n in projects.items():
            m["by_project"].labels(*labels).inc(n)
        for (route, status), n in http.items():
            m["http"].labels(route, str(status)).inc(n)
        _observe_many(m["decision_seconds"], latency, latency_sum / 1000)

    @staticmethod
    def _capped(seen: set[str], cap: int, name: object) -> str:
        if not isinstance(name, str):
            return "other" if name is not None else ""
        if name in seen:
            return name
        if len(seen) < cap and len(name) <= 200:
            seen.add(name)
            return name
        return "other"


def _add(into: dict, key: Any, n: int) -> None:
    into[key] = into.get(key, 0) + n


def _observe_many(histogram: Any, counts: list[int], total: float) -> None:
    """Add binned observations to a histogram at once: `counts[i]` observations in bucket
    i (the last: +Inf), summing to `total`. prometheus-client has no public call for it;
    this adds to the same values observe() does (its per-bucket values and _sum: the
    pinned minor, checked against observe() by tests/ops/test_metrics.py)."""
    if not any(counts):
        return
    histogram._sum.inc(total)
    for i, n in enumerate(counts):
        if n:
            histogram._buckets[i].inc(n)
