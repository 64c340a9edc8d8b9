/**
 * toolgate-client: ask toolgate, the policy-decision service for AI agents, before every
 * tool call.
 *
 * ```ts
 * import { Client, ToolgateDeny, ToolgateUnavailableError } from "toolgate-client";
 * const client = new Client("http://127.0.0.1:8000", { token: "tg_..." });
 * await client.enforce({ planId: "p-1", tool: { name: "fs.read" } }); // Decision, or throws
 * ```
 */

export {
  Client,
  type Approval,
  type AuthorizeOptions,
  type AuthorizeRequest,
  type Context,
  type CreatePlanOptions,
  type EnforceOptions,
  type ErrorsDocument,
  type GuardOptions,
  type Layer,
  type Outcome,
  type OutcomeOptions,
  type OutcomeStatus,
  type Plan,
  type SafetyProfile,
  type ToolSpec,
} from "./client.js";
export { Decision, DecisionParseError, Deny, type Check, type DecisionWire } from "./decision.js";
export {
  CODES,
  PARENTS,
  errorClassFor,
  hierarchyOf,
  resolveDenyClass,
  type Details,
  ToolgateDeny,
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
  ToolgateError,
  ToolgateUnavailableError,
  ToolgateRequestError,
} from "./errors.js";
export {
  DEFAULT_BASE_URL,
  duplicateKey,
  MAX_BACKOFF,
  RETRY_STATUSES,
  VERSION,
  type ClientOptions,
  type FetchLike,
  type RequestOptions,
} from "./http.js";
export type { components, operations, paths } from "./openapi.js";
