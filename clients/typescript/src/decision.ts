/** Typed views of toolgate's decisions, parsed strictly where safety depends on it. */

import {
  type Details,
  isObject,
  resolveDenyClass,
  type ToolgateDeny,
} from "./errors.js";
import type { components } from "./openapi.js";

/** The decision as sent on the wire (`POST /v1/authorize-tool`'s answer). */
export type DecisionWire = components["schemas"]["DecisionOut"];
export type Check = components["schemas"]["CheckOut"];
export type ProfileSummary = components["schemas"]["ProfileSummary"];

/** Thrown by the parsers; the client turns it into ToolgateUnavailableError. */
export class DecisionParseError extends Error {}
Object.defineProperty(DecisionParseError.prototype, "name", { value: "DecisionParseError" });

function optString(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "string") return value;
  throw new DecisionParseError(`${name} must be a string or null, got ${typeof value}`);
}

/** Why a call was denied (SPEC §3 "Response shape"). */
export class Deny {
  constructor(
    readonly error: string,
    readonly hierarchy: string[],
    readonly code: string | null,
    readonly check: string | null,
    readonly message: string,
    readonly details: Details = {},
  ) {}

  static fromJSON(data: unknown): Deny {
    if (!isObject(data)) throw new DecisionParseError("deny must be an object");
    const error = data["error"];
    if (typeof error !== "string" || !error) {
      throw new DecisionParseError("deny.error must be a non-empty string");
    }
    const hierarchy = data["hierarchy"] ?? [error];
    if (!Array.isArray(hierarchy) || !hierarchy.every((h) => typeof h === "string")) {
      throw new DecisionParseError("deny.hierarchy must be a list of strings");
    }
    const details = data["details"] ?? {};
    if (!isObject(details)) throw new DecisionParseError("deny.details must be an object");
    const message = data["message"];
    return new Deny(
      error,
      [...(hierarchy as string[])],
      optString(data["code"], "deny.code"),
      optString(data["check"], "deny.check"),
      typeof message === "string" ? message : "",
      details,
    );
  }

  /** The class `Decision.raiseForDeny()` throws (fails closed to ToolRuntimeError). */
  get exceptionClass(): typeof ToolgateDeny {
    return resolveDenyClass(this.error, this.hierarchy);
  }
}

/**
 * One answer of `POST /v1/authorize-tool`. `allowed` is true only when the service said
 * JSON `true`; a deny always carries `deny`. `raw` is the answer as received.
 */
export class Decision {
  constructor(
    readonly decisionId: string | null,
    readonly allowed: boolean,
    readonly deny: Deny | null,
    readonly planId: string | null = null,
    readonly profile: ProfileSummary | null = null,
    readonly checks: Check[] | null = null,
    readonly raw: DecisionWire | Record<string, unknown> = {},
    /** The X-Request-ID of the HTTP call that produced this decision. */
    readonly requestId: string | null = null,
  ) {}

  static fromJSON(data: unknown, requestId: string | null = null): Decision {
    if (!isObject(data)) throw new DecisionParseError("a decision must be a JSON object");
    const allowed = data["allowed"];
    if (typeof allowed !== "boolean") {
      throw new DecisionParseError("decision.allowed must be a JSON boolean");
    }
    const rawDeny = data["deny"];
    let deny: Deny | null = null;
    if (allowed) {
      if (rawDeny !== undefined && rawDeny !== null) {
        throw new DecisionParseError("an allowed decision must not carry a deny");
      }
    } else {
      if (rawDeny === undefined || rawDeny === null) {
        throw new DecisionParseError("a denied decision must carry a deny");
      }
      deny = Deny.fromJSON(rawDeny);
    }
    const profile = data["profile"] ?? null;
    if (profile !== null && !isObject(profile)) {
      throw new DecisionParseError("decision.profile must be an object or null");
    }
    const checks = data["checks"] ?? null;
    if (checks !== null && !Array.isArray(checks)) {
      throw new DecisionParseError("decision.checks must be a list or null");
    }
    const decisionId = data["decision_id"];
    if (typeof decisionId !== "string" || !decisionId) {
      // Every decision is recorded under its id: an answer without one is no decision.
      throw new DecisionParseError("decision.decision_id must be a non-empty string");
    }
    return new Decision(
      decisionId,
      allowed,
      deny,
      optString(data["plan_id"], "plan_id"),
      profile as ProfileSummary | null,
      checks as Check[] | null,
      data,
      requestId,
    );
  }

  /** The deny error this decision stands for (null when allowed). */
  exception(): ToolgateDeny | null {
    if (this.allowed === true && this.deny === null) return null;
    const deny =
      this.deny ??
      new Deny(
        "ToolRuntimeError",
        ["ToolRuntimeError"],
        null,
        null,
        "toolgate did not allow the call and gave no reason",
      );
    const cls = deny.exceptionClass;
    return new cls(deny.message || `toolgate denied the call (${deny.error}: ${deny.code})`, {
      code: deny.code,
      decisionId: this.decisionId,
      details: deny.details,
      check: deny.check,
      hierarchy: deny.hierarchy,
      error: deny.error,
      decision: this,
    });
  }

  /** This decision when allowed; else throws the exact class named by `deny.error`. */
  raiseForDeny(): Decision {
    const exc = this.exception();
    if (exc) throw exc;
    return this;
  }
}
