/**
 * The toolgate client (SPEC §7, in TypeScript's idiom): the Python client's contract, with
 * camelCase options whose `tool` and `context` are the wire's JSON as is.
 *
 * Fail-closed rules, whatever happens:
 * - `enforce` returns only for a parsed decision whose `allowed` is JSON `true`;
 * - a deny throws the class it names (an unknown class: the nearest known ancestor of
 *   `deny.hierarchy`, else ToolRuntimeError);
 * - no decision at all (network, timeout, 5xx, garbage) throws ToolgateUnavailableError.
 */

import { Decision, DecisionParseError } from "./decision.js";
import {
  isObject,
  ToolExecutionError,
  ToolgateUnavailableError,
  type ToolgateDeny,
} from "./errors.js";
import { type ClientOptions, type RequestOptions, segment, Transport } from "./http.js";
import type { components } from "./openapi.js";

type Schemas = components["schemas"];
export type ToolSpec = Schemas["ToolIn"];
export type Context = Schemas["ContextIn"];
export type SafetyProfile = Schemas["SafetyProfile"];
export type Layer = NonNullable<Schemas["AuthorizeIn"]["layer"]>;
export type AuthorizeRequest = Schemas["AuthorizeIn"];
export type Plan = Schemas["PlanOut"];
export type Approval = Schemas["ApprovalOut"];
export type Outcome = Schemas["OutcomeOut"];
export type OutcomeStatus = Schemas["OutcomeIn"]["status"];
export type ErrorsDocument = { errors: { error: string; parent: string | null;
  hierarchy: string[]; codes: string[]; description?: string }[] };

export interface AuthorizeOptions {
  tool: ToolSpec;
  context?: Context;
  planId?: string;
  /** Only without planId; null or absent: no profile. */
  safetyProfile?: SafetyProfile | null;
  layer?: Layer;
  /** Fill `decision.checks` with every check's outcome. */
  explain?: boolean;
  requestId?: string;
}

export interface EnforceOptions extends AuthorizeOptions {
  /**
   * Seconds to wait, when the deny is `human_approval_required` with a pending approval held
   * by the service, for a person to decide it; once granted, the same request is asked again.
   */
  waitForApproval?: number;
}

export interface CreatePlanOptions {
  actionId: string;
  planId?: string;
  automationProfile?: string;
  safetyProfile?: SafetyProfile;
}

export interface OutcomeOptions {
  status?: OutcomeStatus;
  cost?: number;
  verified?: boolean;
  error?: string;
  argsSha256?: string;
  artifacts?: Schemas["ArtifactIn"][];
}

type Builder<A extends unknown[], T> = T | ((...args: A) => T);

export interface GuardOptions<A extends unknown[], R> {
  planId?: Builder<A, string | undefined>;
  context?: Builder<A, Context | undefined>;
  safetyProfile?: Builder<A, SafetyProfile | null | undefined>;
  layer?: Layer;
  /** Report the outcome (default true): `succeeded`, or `execution_failed` when fn throws. */
  report?: boolean;
  /** The cost to report: a number, or a function of fn's result. */
  cost?: number | ((result: Awaited<R>) => number | undefined);
}

function built<A extends unknown[], T>(value: Builder<A, T>, args: A): T {
  return typeof value === "function" ? (value as (...a: A) => T)(...args) : value;
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.slice(0, 2000);
}

function pendingApproval(decision: Decision): Record<string, unknown> | null {
  const deny = decision.deny;
  if (!deny || deny.code !== "human_approval_required") return null;
  const approval = deny.details["approval"];
  return isObject(approval) && approval["state"] === "pending" &&
      typeof approval["approval_id"] === "string" ? approval : null;
}

function gaveUp(decision: Decision, approval: Record<string, unknown>): ToolgateDeny {
  const exc = decision.exception() as ToolgateDeny;
  exc.details = { ...exc.details, approval };
  return exc;
}

/** The `wait` of one GET: whole seconds, 1..60 (the server's bounds). */
const waitSlice = (remaining: number) => Math.max(1, Math.min(60, Math.ceil(remaining)));

export class Client {
  private readonly http: Transport;

  /** `new Client("http://127.0.0.1:8000", { token, timeout: 2, retries: 2 })`. */
  constructor(baseUrl?: string, options: ClientOptions = {}) {
    this.http = new Transport(baseUrl, options);
  }

  get baseUrl(): string { return this.http.baseUrl; }
  get timeout(): number | null { return this.http.timeout; }
  get retries(): number { return this.http.retries; }
  get backoff(): number { return this.http.backoff; }

  toString(): string { return `Client(${this.http.baseUrl})`; } // never shows the token

  /** Any route: the decoded JSON answer (null when empty); the errors of every call. */
  request(method: string, path: string, options: RequestOptions = {}): Promise<unknown> {
    return this.http.request(method, path, options);
  }

  private async object<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const data = await this.http.request(method, path, options);
    if (!isObject(data)) {
      throw new ToolgateUnavailableError(`toolgate's answer to ${method} ${path} is not a JSON object`,
        { code: "invalid_answer" });
    }
    return data as T;
  }

  private static decision(data: unknown, requestId: string): Decision {
    try {
      return Decision.fromJSON(data, requestId);
    } catch (error) {
      if (!(error instanceof DecisionParseError)) throw error;
      throw new ToolgateUnavailableError(`toolgate's answer is not a valid decision: ${error.message}`,
        { code: "invalid_decision", requestId, cause: error });
    }
  }

  // -- decisions ------------------------------------------------------------------------

  /** One decision (`POST /v1/authorize-tool`); a deny is returned, not thrown. */
  async authorizeTool(options: AuthorizeOptions): Promise<Decision> {
    const { tool, context, planId, safetyProfile, layer, explain } = options;
    if (!isObject(tool)) throw new TypeError("tool must be an object such as { name: 'fs.write' }");
    const body: AuthorizeRequest = { tool, context: { ...(context ?? {}) } };
    if (planId !== undefined) body.plan_id = planId;
    if (safetyProfile !== undefined && safetyProfile !== null) body.safety_profile = safetyProfile;
    if (layer !== undefined) body.layer = layer;
    if (explain) body.explain = true;
    const requestId = options.requestId || crypto.randomUUID().replaceAll("-", "");
    const data = await this.http.request("POST", "/v1/authorize-tool", { json: body, requestId });
    return Client.decision(data, requestId);
  }

  /** A batch (`POST /v1/authorize-tools`, at most 100 wire requests), answered in order. */
  async authorizeTools(requests: AuthorizeRequest[], options: { requestId?: string } = {}):
      Promise<Decision[]> {
    const requestId = options.requestId || crypto.randomUUID().replaceAll("-", "");
    const data = await this.http.request("POST", "/v1/authorize-tools",
      { json: { requests }, requestId });
    const items = isObject(data) ? data["items"] : undefined;
    if (!Array.isArray(items) || items.length !== requests.length) {
      throw new ToolgateUnavailableError(
        `toolgate's batch answer must hold ${requests.length} items`,
        { code: "invalid_decision", requestId });
    }
    return items.map((item) => Client.decision(item, requestId));
  }

  /** The Decision when allowed; else throws the exact class the deny names. */
  async enforce(options: EnforceOptions): Promise<Decision> {
    const { waitForApproval, requestId, ...ask } = options;
    let decision = await this.authorizeTool(requestId ? { ...ask, requestId } : ask);
    let approval = waitForApproval ? pendingApproval(decision) : null;
    if (!approval) return decision.raiseForDeny();
    const deadline = Date.now() + (waitForApproval ?? 0) * 1000;
    for (;;) {
      const remaining = (deadline - Date.now()) / 1000;
      if (remaining <= 0) throw gaveUp(decision, approval);
      approval = await this.getApproval(String(approval["approval_id"]),
        { wait: waitSlice(remaining) }) as unknown as Record<string, unknown>;
      if (approval["state"] === "pending") continue;
      if (approval["state"] !== "granted") throw gaveUp(decision, approval);
      decision = await this.authorizeTool(ask);
      if (decision.allowed) return decision;
      // Someone else used the grant first: wait on the approval this deny names.
      const following = pendingApproval(decision);
      if (!following) return decision.raiseForDeny();
      approval = following;
    }
  }

  // -- approvals (SPEC §10) ---------------------------------------------------------------

  /** One approval; `wait` (1..60 s): answered when it leaves pending, or then. */
  async getApproval(approvalId: string, options: { wait?: number } = {}): Promise<Approval> {
    const path = `/v1/approvals/${segment(approvalId, "approvalId")}`;
    if (options.wait === undefined) return this.object("GET", path);
    const wait = Math.trunc(options.wait);
    // The answer may take `wait` seconds by design: the client's timeout is for decisions.
    const timeout = this.http.timeout === null ? null : this.http.timeout + wait;
    return this.object("GET", path, { params: { wait }, timeout });
  }

  /**
   * Wait up to `timeout` seconds (default 60) for the approval to leave `pending`: the
   * approval as last read (still `pending` when the time ran out).
   */
  async waitForApproval(approvalId: string, options: { timeout?: number } = {}):
      Promise<Approval> {
    const deadline = Date.now() + (options.timeout ?? 60) * 1000;
    for (;;) {
      const remaining = (deadline - Date.now()) / 1000;
      const approval = await this.getApproval(approvalId, { wait: waitSlice(remaining) });
      if (approval.state !== "pending" || Date.now() >= deadline) return approval;
    }
  }

  async listApprovals(filters: { state?: string; project?: string; planId?: string; tool?: string;
      limit?: number; cursor?: string } = {}): Promise<Schemas["ApprovalList"]> {
    const { planId, ...rest } = filters;
    return this.object("GET", "/v1/approvals", { params: { ...rest, plan_id: planId } });
  }

  async grantApproval(approvalId: string, options: { note?: string; ttlSeconds?: number;
      uses?: number } = {}): Promise<Approval> {
    const json = { note: options.note, ttl_seconds: options.ttlSeconds, uses: options.uses };
    return this.object("POST", `/v1/approvals/${segment(approvalId, "approvalId")}/grant`, { json });
  }

  async rejectApproval(approvalId: string, reason: string): Promise<Approval> {
    return this.object("POST", `/v1/approvals/${segment(approvalId, "approvalId")}/reject`,
      { json: { reason } });
  }

  async cancelApproval(approvalId: string, reason?: string): Promise<Approval> {
    return this.object("POST", `/v1/approvals/${segment(approvalId, "approvalId")}/cancel`,
      { json: reason === undefined ? {} : { reason } });
  }

  // -- plans, resolution, screening, errors ------------------------------------------------

  /** Plan use: resolve and lock the profile (`POST /v1/plans`); idempotent. */
  async createPlan(options: CreatePlanOptions): Promise<Plan> {
    const json: Schemas["PlanIn"] = { action_id: options.actionId };
    if (options.planId !== undefined) json.plan_id = options.planId;
    if (options.automationProfile !== undefined) json.automation_profile = options.automationProfile;
    if (options.safetyProfile !== undefined) json.safety_profile = options.safetyProfile;
    return this.object("POST", "/v1/plans", { json });
  }

  async getPlan(planId: string): Promise<Schemas["PlanWithLedgerOut"]> {
    return this.object("GET", `/v1/plans/${segment(planId, "planId")}`);
  }

  /** Resolution without side effects (`POST /v1/resolve`); the body is the wire's. */
  async resolve(body: Schemas["ResolveIn"]): Promise<Schemas["ResolveOut"]> {
    return this.object("POST", "/v1/resolve", { json: body });
  }

  /** Pre-model phrase screening (`POST /v1/screen`). */
  async screen(options: { text: string; skill?: string }): Promise<Schemas["ScreenOut"]> {
    return this.object("POST", "/v1/screen", { json: options });
  }

  /** The error hierarchy and codes (`GET /v1/errors`). */
  async errors(): Promise<ErrorsDocument> {
    return this.object("GET", "/v1/errors");
  }

  // -- outcomes (SPEC §11) -------------------------------------------------------------------

  /**
   * Report what an allowed call did (`POST /v1/decisions/{id}/outcome`): the stored outcome.
   * The same report again is answered with it; a different one throws (409).
   */
  async reportOutcome(decisionId: string, options: OutcomeOptions = {}): Promise<Outcome> {
    const json: Schemas["OutcomeIn"] = { status: options.status ?? "succeeded" };
    if (options.cost !== undefined) json.cost = options.cost;
    if (options.verified !== undefined) json.verified = options.verified;
    if (options.error !== undefined) json.error = options.error;
    if (options.argsSha256 !== undefined) json.args_sha256 = options.argsSha256;
    if (options.artifacts !== undefined) json.artifacts = options.artifacts;
    return this.object("POST", `/v1/decisions/${segment(decisionId, "decisionId")}/outcome`,
      { json });
  }

  // -- guards ----------------------------------------------------------------------------------

  /**
   * `fn`, enforced before every call: it does not run on a deny (the deny's class is thrown)
   * or when toolgate is unavailable. `tool` (and planId, context, safetyProfile) is a value,
   * or a function of fn's arguments. The outcome is reported: `succeeded` with the cost,
   * or `execution_failed`, and then ToolExecutionError is thrown with fn's error as `cause`.
   */
  guard<A extends unknown[], R>(
    tool: Builder<A, ToolSpec>,
    fn: (...args: A) => R,
    options: GuardOptions<A, R> = {},
  ): (...args: A) => Promise<Awaited<R>> {
    const report = options.report ?? true;
    return async (...args: A): Promise<Awaited<R>> => {
      const ask: AuthorizeOptions = { tool: built(tool, args) };
      const planId = built(options.planId, args);
      const context = built(options.context, args);
      const safetyProfile = built(options.safetyProfile, args);
      if (planId !== undefined) ask.planId = planId;
      if (context !== undefined) ask.context = context;
      if (safetyProfile !== undefined) ask.safetyProfile = safetyProfile;
      if (options.layer !== undefined) ask.layer = options.layer;
      const decision = await this.enforce(ask);
      if (!report) return await fn(...args);
      const decisionId = decision.decisionId ?? "";
      let result: Awaited<R>;
      try {
        result = await fn(...args);
      } catch (error) {
        await this.reportOutcome(decisionId, { status: "execution_failed", error: errorText(error) });
        throw new ToolExecutionError(
          `Tool call of decision ${decisionId} failed: ${errorText(error)}`,
          { code: "execution_failed", decisionId, decision, cause: error });
      }
      const cost = typeof options.cost === "function" ? options.cost(result) : options.cost;
      await this.reportOutcome(decisionId, cost === undefined ? {} : { cost });
      return result;
    };
  }
}
