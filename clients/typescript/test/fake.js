// A scripted `fetch` for the unit tests: answers in order, records every request.

export function json(status, body, headers = {}) {
  return { status, body: body === undefined ? "" : JSON.stringify(body), headers };
}

export const ALLOW = { decision_id: "d-1", allowed: true, deny: null, plan_id: "p-1",
  profile: null, checks: null };

export function deny(error, code, extra = {}) {
  return { decision_id: "d-2", allowed: false, plan_id: "p-1", profile: null, checks: null,
    deny: { error, hierarchy: extra.hierarchy ?? [error], code, check: extra.check ?? "sandbox",
      message: extra.message ?? `denied ${code}`, details: extra.details ?? {} } };
}

/** `answers`: a list of json(...) results, Errors (thrown by fetch) or functions(request). */
export function scripted(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    const call = { url, method: init.method, headers: init.headers,
      body: init.body === undefined ? undefined : JSON.parse(init.body), signal: init.signal };
    calls.push(call);
    let answer = answers.length ? answers.shift() : new Error("no more scripted answers");
    if (typeof answer === "function") answer = await answer(call);
    if (answer instanceof Error) throw answer;
    return new Response(answer.body === "" ? null : answer.body,
      { status: answer.status, headers: { "content-type": "application/json", ...answer.headers } });
  };
  return { fetch, calls };
}
