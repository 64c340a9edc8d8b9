/**
 * The errors of the toolgate client: three disjoint families, as in the Python client.
 *
 * - Denies: toolgate decided, and the answer is no. One class per class of the service's
 *   hierarchy (`GET /v1/errors`, SPEC §3), with the same name and parent; all extend
 *   {@link ToolgateDeny}, so `err instanceof ToolgateDeny` catches any deny.
 * - {@link ToolgateUnavailableError}: no decision could be obtained (connection error,
 *   timeout, 5xx after the retries, an answer that is not a decision). Never a deny, but the
 *   tool must not run (fail closed).
 * - {@link ToolgateRequestError}: toolgate refused the request (4xx with the envelope
 *   `{"error": {"code", "message", "details"}}`).
 *
 * The table (CODES, the parent of each class) is a copy of the service's; the unit tests
 * check it against `clients/python/tests/errors_document.json` (the snapshot of
 * `GET /v1/errors` the service's suite holds in step with its table) and the live tests
 * against a running service.
 */

import type { Decision } from "./decision.js";

export type Details = Record<string, unknown>;

export interface DenyErrorOptions {
  code?: string | null;
  decisionId?: string | null;
  details?: Details | null;
  check?: string | null;
  hierarchy?: string[];
  error?: string;
  decision?: Decision | null;
  status?: number | null;
  cause?: unknown;
}

/** Base of every deny class: `err instanceof ToolgateDeny` catches any deny. */
export class ToolgateDeny extends Error {
  /** The first code of the class in CODES, used when none is given. */
  static defaultCode: string | null = null;

  readonly code: string | null;
  readonly decisionId: string | null;
  details: Details;
  readonly check: string | null;
  /** Class names, root first (the service's, or the client's own for the class). */
  readonly hierarchy: string[];
  /** The class name the service sent; differs from `name` only when the client did not know it. */
  readonly error: string;
  /** The decision this deny was raised from, when there is one. */
  readonly decision: Decision | null;
  /** The HTTP status, for a PlanReadOnlyError from a 409 answer; else null. */
  readonly status: number | null;

  constructor(message = "", options: DenyErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const cls = new.target as unknown as typeof ToolgateDeny;
    this.code = options.code ?? cls.defaultCode;
    this.decisionId = options.decisionId ?? null;
    this.details = { ...(options.details ?? {}) };
    this.check = options.check ?? null;
    this.hierarchy = options.hierarchy ? [...options.hierarchy] : hierarchyOf(this.name);
    this.error = options.error ?? this.name;
    this.decision = options.decision ?? null;
    this.status = options.status ?? null;
  }
}

/** Root of the runtime (ToolRuntime._enforce_capabilities) denies. */
export class ToolRuntimeError extends ToolgateDeny {}
/**
 * Read-only plan violation (check `read_only`), or a call a deny rule matches (check
 * `rules`, code `rule_denied`; `details.rule` names the rule).
 */
export class ToolAccessDeniedError extends ToolRuntimeError {}
/** Checkpointing required but the tool is not checkpointable. */
export class ToolCheckpointRequiredError extends ToolRuntimeError {}
/** Unsafe tool or skill-category violation. */
export class ToolSafetyViolationError extends ToolRuntimeError {}
/** A writing tool without a sandbox while the profile requires one. */
export class ToolSandboxRequiredError extends ToolRuntimeError {}
/**
 * Human approval required and not recorded. `approval` is the approval the deny names
 * (`details.approval`), or after `enforce({ waitForApproval })` gave up, the approval as
 * last read.
 */
export class ToolHumanApprovalRequiredError extends ToolRuntimeError {
  get approval(): Record<string, unknown> | null {
    const approval = this.details["approval"];
    return isObject(approval) ? approval : null;
  }
}
/** Per-plan or total cost limit reached. */
export class ToolCostLimitExceededError extends ToolRuntimeError {}
/** Step retry count above the profile's limit. */
export class ToolRetryLimitExceededError extends ToolRuntimeError {}
/** Destructive tool without dry_run or confirmed. */
export class ToolConfirmationRequiredError extends ToolRuntimeError {}
/** A sandbox-sensitive path argument escapes the sandbox root. */
export class ToolSandboxEscapeError extends ToolRuntimeError {}
export class ToolNotActivatedError extends ToolRuntimeError {}
export class ToolActivationError extends ToolRuntimeError {}
/** Also what `guard` throws when the guarded function fails (its error is the `cause`). */
export class ToolExecutionError extends ToolRuntimeError {}
export class ToolDeactivationError extends ToolRuntimeError {}

/** Skill write guard (layer `skill`); `errorType` is `"PERMISSION_DENIED"`. */
export class SkillExecutionError extends ToolgateDeny {
  readonly errorType: string;

  constructor(message = "", options: DenyErrorOptions & { errorType?: string } = {}) {
    super(message, options);
    const fromDetails = this.details["error_type"];
    this.errorType =
      options.errorType ?? (typeof fromDetails === "string" ? fromDetails : "PERMISSION_DENIED");
  }
}
/** ChangeSetCapture refused to wrap a write-capable tool (layer `changeset`). */
export class ReadOnlyViolationError extends ToolgateDeny {}
/** A plan transition refused because the plan is read-only (also a 409 `plan_read_only`). */
export class PlanReadOnlyError extends ToolgateDeny {}
/** Pre-model rejection: the text matched an unsafe phrase. */
export class UnsafeRequestRejectedError extends ToolgateDeny {}

/** Class name -> the deny codes the service may send with it (SPEC §3). */
export const CODES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  ToolRuntimeError: [],
  ToolAccessDeniedError: ["read_only", "rule_denied"],
  ToolCheckpointRequiredError: ["checkpoint_required"],
  ToolSafetyViolationError: ["unsafe_tool", "skill_category_missing", "skill_category_not_allowed"],
  ToolSandboxRequiredError: ["sandbox_required"],
  ToolHumanApprovalRequiredError: ["human_approval_required"],
  ToolCostLimitExceededError: ["plan_cost_limit_exceeded", "total_cost_limit_exceeded"],
  ToolRetryLimitExceededError: ["retry_limit_exceeded"],
  ToolConfirmationRequiredError: ["confirmation_required"],
  ToolSandboxEscapeError: ["sandbox_path_escape"],
  ToolNotActivatedError: ["tool_not_activated", "unregistered_tool"],
  ToolActivationError: ["activation_failed"],
  ToolExecutionError: ["execution_failed"],
  ToolDeactivationError: ["deactivation_failed"],
  SkillExecutionError: ["write_denied"],
  ReadOnlyViolationError: ["changeset_read_only"],
  PlanReadOnlyError: ["plan_read_only"],
  UnsafeRequestRejectedError: ["unsafe_phrase"],
});

const CLASSES: Record<string, typeof ToolgateDeny> = {
  ToolRuntimeError,
  ToolAccessDeniedError,
  ToolCheckpointRequiredError,
  ToolSafetyViolationError,
  ToolSandboxRequiredError,
  ToolHumanApprovalRequiredError,
  ToolCostLimitExceededError,
  ToolRetryLimitExceededError,
  ToolConfirmationRequiredError,
  ToolSandboxEscapeError,
  ToolNotActivatedError,
  ToolActivationError,
  ToolExecutionError,
  ToolDeactivationError,
  SkillExecutionError,
  ReadOnlyViolationError,
  PlanReadOnlyError,
  UnsafeRequestRejectedError,
};

// `name` is the class name on every instance, whatever a bundler does to class names.
for (const [name, cls] of Object.entries(CLASSES)) {
  Object.defineProperty(cls.prototype, "name", { value: name, configurable: true });
  cls.defaultCode = CODES[name]?.[0] ?? null;
}
Object.defineProperty(ToolgateDeny.prototype, "name", { value: "ToolgateDeny", configurable: true });

/** Class name -> its parent's name in the service's hierarchy (null for a root). */
export const PARENTS: Readonly<Record<string, string | null>> = Object.freeze(
  Object.fromEntries(
    Object.entries(CLASSES).map(([name, cls]) => {
      const parent = Object.getPrototypeOf(cls) as typeof ToolgateDeny;
      return [name, parent === ToolgateDeny ? null : parent.prototype.name];
    }),
  ),
);

/** The deny class named `name` (e.g. `"ToolSandboxRequiredError"`), or undefined. */
export function errorClassFor(name: unknown): typeof ToolgateDeny | undefined {
  return typeof name === "string" && Object.hasOwn(CLASSES, name) ? CLASSES[name] : undefined;
}

/** Class names from the root down to `name`; `[name]` for an unknown name. */
export function hierarchyOf(name: string): string[] {
  const chain = [name];
  for (let parent = PARENTS[name]; parent; parent = PARENTS[parent] ?? null) chain.push(parent);
  return chain.reverse();
}

/**
 * The class to throw for a deny naming `error`; never fails (fail closed): the named class
 * when known, else the most specific known class of `hierarchy` (a newer service may add
 * subclasses), else ToolRuntimeError.
 */
export function resolveDenyClass(error: unknown, hierarchy?: unknown): typeof ToolgateDeny {
  const known = errorClassFor(error);
  if (known) return known;
  if (Array.isArray(hierarchy)) {
    for (const ancestor of [...hierarchy].reverse()) {
      const cls = errorClassFor(ancestor);
      if (cls) return cls;
    }
  }
  return ToolRuntimeError;
}

export interface ToolgateErrorOptions {
  status?: number | null;
  code?: string | null;
  details?: Details | null;
  requestId?: string | null;
  cause?: unknown;
}

/** Base of the client's non-deny errors (unavailable, request refused). */
export class ToolgateError extends Error {
  readonly status: number | null;
  readonly code: string | null;
  readonly details: Details;
  readonly requestId: string | null;
  /** Never set for these errors; present so handlers can read it uniformly. */
  readonly decisionId: string | null = null;

  constructor(message: string, options: ToolgateErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? null;
    this.code = options.code ?? null;
    this.details = { ...(options.details ?? {}) };
    this.requestId = options.requestId ?? null;
  }
}

/**
 * No decision could be obtained: treat it as *not allowed*; retrying later may help.
 * `status` is the last HTTP status, or null when no answer arrived.
 */
export class ToolgateUnavailableError extends ToolgateError {}

/** toolgate answered 4xx; `status`, `code`, `message`, `details` come from the envelope. */
export class ToolgateRequestError extends ToolgateError {}

for (const cls of [ToolgateError, ToolgateUnavailableError, ToolgateRequestError]) {
  Object.defineProperty(cls.prototype, "name", { value: cls.name, configurable: true });
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
