/**
 * One call to toolgate: request building, the retry loop and answer classification, on the
 * platform's `fetch` (no other runtime dependency). Mirrors the Python client's _base.py and
 * Client.request: connection errors, timeouts and 502/503/504 are retried with exponential
 * backoff and jitter, with the same X-Request-ID on every attempt; 4xx never.
 */

import {
  type Details,
  isObject,
  PlanReadOnlyError,
  ToolgateRequestError,
  ToolgateUnavailableError,
} from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8000";
export const VERSION = "0.1.0";
/** Statuses retried (same X-Request-ID) before giving up with ToolgateUnavailableError. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);
/** Upper bound of one backoff sleep, in seconds, whatever `backoff` and the attempt. */
export const MAX_BACKOFF = 2.0;

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** The key (`Authorization: Bearer ...`); default: `TOOLGATE_TOKEN` from the environment. */
  token?: string | null;
  /**
   * Seconds per attempt (null: none); default 2. A total deadline: connecting, sending and
   * every byte of the answer within it, or the attempt fails (and is retried).
   */
  timeout?: number | null;
  /** Further attempts after the first, for connection errors, timeouts, 502/503/504; default 2. */
  retries?: number;
  /** Base of the exponential backoff, in seconds; default 0.05. */
  backoff?: number;
  /** Extra headers sent with every call. */
  headers?: Record<string, string>;
  /** A `fetch` to use instead of the global one (tests, proxies, an in-process app). */
  fetch?: FetchLike;
}

export interface RequestOptions {
  json?: unknown;
  params?: Record<string, string | number | boolean | null | undefined>;
  requestId?: string;
  /** Seconds for this call's attempts, instead of the client's. */
  timeout?: number | null;
}

function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name] || undefined;
}

/** A path segment, percent-encoded; an empty or non-string value is a programming error. */
export function segment(value: unknown, what: string): string {
  if (typeof value !== "string" || !value) throw new TypeError(`${what} must be a non-empty string`);
  return encodeURIComponent(value).replace(/%3A/gi, ":").replace(/%40/g, "@");
}

/** JSON text of a body; NaN and Infinity are refused here, clearly (toolgate refuses them). */
export function encodeJSON(body: unknown): string {
  return JSON.stringify(body, (_key, value: unknown) => {
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new RangeError(`toolgate accepts finite numbers only, got ${value}`);
    }
    if (typeof value === "bigint") throw new TypeError("a bigint cannot be sent as JSON");
    return value;
  });
}

/**
 * The first key that appears twice in one object of `text` (valid JSON), at any depth, or
 * null. `JSON.parse` keeps the last of two equal keys silently: `{"allowed": false, ...,
 * "allowed": true}` would read as an allow, and a decision is never a guess.
 */
export function duplicateKey(text: string): string | null {
  const objects: (Set<string> | null)[] = []; // null: an array
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const literal = text.slice(i, j + 1);
      i = j + 1;
      const keys = objects[objects.length - 1];
      if (keys) {
        let k = i;
        while (text[k] === " " || text[k] === "\t" || text[k] === "\n" || text[k] === "\r") k++;
        if (text[k] === ":") {
          const key = JSON.parse(literal) as string;
          if (keys.has(key)) return key;
          keys.add(key);
        }
      }
      continue;
    }
    if (c === "{") objects.push(new Set());
    else if (c === "[") objects.push(null);
    else if (c === "}" || c === "]") objects.pop();
    i++;
  }
  return null;
}

/** JSON as RFC 8259 says it, no duplicate key at any depth; throws SyntaxError otherwise. */
export function parseStrict(text: string): unknown {
  const value: unknown = JSON.parse(text);
  const twice = duplicateKey(text);
  if (twice !== null) throw new SyntaxError(`duplicate key ${JSON.stringify(twice)}`);
  return value;
}

function envelope(text: string): { code: string | null; message: string | null; details: Details } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { code: null, message: null, details: {} };
  }
  const err = isObject(body) ? body["error"] : undefined;
  if (!isObject(err)) {
    if (isObject(body) && "detail" in body) {
      return { code: null, message: String(body["detail"]), details: { detail: body["detail"] } };
    }
    return { code: null, message: null, details: {} };
  }
  return {
    code: typeof err["code"] === "string" ? err["code"] : null,
    message: typeof err["message"] === "string" ? err["message"] : null,
    details: isObject(err["details"]) ? err["details"] : {},
  };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name}: ${error.message}${cause}`;
}

export class Transport {
  readonly baseUrl: string;
  readonly token: string | null;
  readonly timeout: number | null;
  readonly retries: number;
  readonly backoff: number;
  private readonly headers: Record<string, string>;
  private readonly fetchFn: FetchLike;
  /** Replaced by the tests to observe the backoff without waiting. */
  sleep: (seconds: number) => Promise<void> = (s) =>
    new Promise((resolve) => setTimeout(resolve, s * 1000));

  constructor(baseUrl: string | undefined, options: ClientOptions = {}) {
    const base = (baseUrl ?? env("TOOLGATE_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    let url: URL;
    try {
      url = new URL(base);
    } catch {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(base)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(base)}`);
    }
    const retries = options.retries ?? 2;
    if (!Number.isInteger(retries) || retries < 0) {
      throw new RangeError("retries must be an integer >= 0");
    }
    const backoff = options.backoff ?? 0.05;
    if (typeof backoff !== "number" || !(backoff >= 0)) {
      throw new RangeError("backoff must be a number >= 0");
    }
    const timeout = options.timeout === undefined ? 2.0 : options.timeout;
    if (timeout !== null && (typeof timeout !== "number" || !(timeout > 0))) {
      throw new RangeError("timeout must be a number of seconds > 0, or null");
    }
    this.baseUrl = base;
    this.token = options.token === undefined ? (env("TOOLGATE_TOKEN") ?? null) : options.token;
    this.timeout = timeout;
    this.retries = retries;
    this.backoff = backoff;
    this.headers = { Accept: "application/json", "User-Agent": `toolgate-client-ts/${VERSION}` };
    if (this.token) this.headers["Authorization"] = `Bearer ${this.token}`;
    Object.assign(this.headers, options.headers ?? {});
    const fetchFn = options.fetch ?? (globalThis.fetch as FetchLike | undefined);
    if (typeof fetchFn !== "function") throw new TypeError("no fetch: Node 20+ has one");
    this.fetchFn = fetchFn;
  }

  /** Exponential backoff with jitter: in [b/2, b] where b = backoff * 2**attempt. */
  delay(attempt: number): number {
    const ceiling = Math.min(this.backoff * 2 ** attempt, MAX_BACKOFF);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  /**
   * Send one call; returns the decoded JSON answer (null for an empty one). Throws
   * ToolgateRequestError for 4xx (PlanReadOnlyError for a 409 `plan_read_only`) and
   * ToolgateUnavailableError when no answer was obtained.
   */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<unknown> {
    const requestId = options.requestId || crypto.randomUUID().replaceAll("-", "");
    const headers: Record<string, string> = { ...this.headers, "X-Request-ID": requestId };
    let body: string | undefined;
    if (options.json !== undefined && options.json !== null) {
      body = encodeJSON(options.json);
      headers["Content-Type"] = "application/json";
    }
    let url = this.baseUrl + path;
    const params = Object.entries(options.params ?? {}).filter(([, v]) => v != null);
    if (params.length) {
      url += (url.includes("?") ? "&" : "?") +
        new URLSearchParams(params.map(([k, v]): [string, string] => [k, String(v)])).toString();
    }
    const timeout = options.timeout === undefined ? this.timeout : options.timeout;
    for (let attempt = 0; ; attempt++) {
      const last = attempt === this.retries;
      let status: number;
      let text: string;
      // A timer of our own (AbortSignal.timeout's does not keep the process alive).
      const abort = new AbortController();
      const timer = timeout === null ? undefined : setTimeout(
        () => abort.abort(new DOMException(`no answer within ${timeout} s`, "TimeoutError")),
        Math.ceil(timeout * 1000));
      try {
        const init: RequestInit = { method, headers, redirect: "manual", signal: abort.signal };
        if (body !== undefined) init.body = body;
        const response = await this.fetchFn(url, init);
        status = response.status;
        text = await response.text(); // within the attempt's timeout too
      } catch (error) {
        if (last) {
          throw new ToolgateUnavailableError(
            `toolgate unreachable after ${attempt + 1} attempt(s): ${describe(error)}`,
            { code: "unavailable", requestId, cause: error },
          );
        }
        await this.sleep(this.delay(attempt));
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (!RETRY_STATUSES.has(status) || last) return this.result(status, text, requestId);
      await this.sleep(this.delay(attempt));
    }
  }

  private result(status: number, text: string, requestId: string): unknown {
    if (status >= 200 && status < 300) {
      if (status === 204 || !text) return null;
      try {
        return parseStrict(text);
      } catch (error) {
        throw new ToolgateUnavailableError(
          `toolgate answered ${status} with a body that is not strict JSON: ${describe(error)}`,
          { code: "unavailable", requestId, cause: error },
        );
      }
    }
    const { code, message, details } = envelope(text);
    if (status >= 400 && status < 500) {
      const text = message || `toolgate refused the request (HTTP ${status})`;
      if (status === 409 && code === "plan_read_only") {
        const decisionId = details["decision_id"];
        throw new PlanReadOnlyError(text, {
          code,
          details,
          status,
          decisionId: typeof decisionId === "string" ? decisionId : null,
        });
      }
      throw new ToolgateRequestError(text, {
        status, code: code ?? `http_${status}`, details, requestId,
      });
    }
    const what = status >= 500 ? `toolgate answered HTTP ${status}`
      : `unexpected HTTP status ${status} from toolgate`;
    throw new ToolgateUnavailableError(message ? `${what}: ${message}` : what, {
      status, code: code ?? "unavailable", details, requestId,
    });
  }
}
