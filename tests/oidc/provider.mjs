// A real OpenID Provider (the npm package oidc-provider, pinned in package-lock.json) on
// 127.0.0.1, for the sign-in tests (tests/auth/test_oidc*.py) and for trying SPEC §21 locally:
//
//   npm ci --prefix tests/oidc && node tests/oidc/provider.mjs        (docs/auth.md)
//
// It prints one line of JSON once it listens: {"issuer": "http://127.0.0.1:PORT", ...}.
// Settings (environment): OIDC_PORT (default 0: any free port), OIDC_PAGE_REDIRECT (the
// page's callback, default http://127.0.0.1:8000/ui/callback; comma-separated for several),
// OIDC_CLIENT_SECRET (default "toolgate-page-secret").
//
// What it holds:
// - client "toolgate-page" (confidential, authorization code + PKCE) for the operators' page;
// - any client may register itself (RFC 7591), as MCP clients do, and ask for an access
//   token for a resource on 127.0.0.1 (RFC 8707): a JWT whose audience is that resource,
//   scope "mcp" (the gateway's HTTP listener, app/gateway/oauth.py);
// - two people: alice (group toolgate-approvers) and bob (group toolgate-auditors); the
//   sign-in form takes their name and any password (oidc-provider's development forms).
import http from 'node:http';

import Provider from 'oidc-provider';

const PEOPLE = {
  alice: { email: 'alice@example.test', name: 'Alice Approver', groups: ['toolgate-approvers'] },
  bob: { email: 'bob@example.test', name: 'Bob Auditor', groups: ['toolgate-auditors'] },
};

const port = Number(process.env.OIDC_PORT || 0);
const redirects = (process.env.OIDC_PAGE_REDIRECT || 'http://127.0.0.1:8000/ui/callback')
  .split(',').map((s) => s.trim()).filter(Boolean);
const secret = process.env.OIDC_CLIENT_SECRET || 'toolgate-page-secret';

function loopbackResource(indicator) {
  try {
    const url = new URL(indicator);
    return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  } catch {
    return false;
  }
}

const server = http.createServer();
await new Promise((resolve) => { server.listen(port, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'toolgate-page',
    client_secret: secret,
    redirect_uris: redirects,
    post_logout_redirect_uris: redirects.map((r) => new URL('/ui', r).href),
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  async findAccount(ctx, id) {
    const person = PEOPLE[id];
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email_verified: true, ...person };
      },
    };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups', 'mcp'],
  // The ID token carries the claims its scopes ask for (as Keycloak, Okta and Entra ID are
  // configured to put groups in it), not only the userinfo endpoint.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  ttl: { AccessToken: 600, IdToken: 600, AuthorizationCode: 60, Session: 3600, Interaction: 600, Grant: 3600 },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      async getResourceServerInfo(_ctx, indicator) {
        if (!loopbackResource(indicator)) throw new Provider.errors.InvalidTarget();
        return {
          scope: 'mcp',
          audience: indicator,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
    rpInitiatedLogout: { enabled: true },
  },
});
provider.proxy = false;
server.on('request', provider.callback());

process.stdout.write(`${JSON.stringify({ issuer, page_client: 'toolgate-page', page_secret: secret, redirect_uris: redirects, people: Object.keys(PEOPLE) })}\n`);

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => { server.close(); process.exit(0); });
}
