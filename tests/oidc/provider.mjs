// Test-only OpenID provider for central's single sign-on end-to-end tests.
//
// It runs the certified `oidc-provider` package on 127.0.0.1 over plain http,
// with an in-memory store, a login form that accepts ANY name and ANY
// password, signing keys made up at each start and an unauthenticated switch
// that forges the next ID token's audience. It is a test fixture and nothing
// else: never use it, or anything copied from it, to log real people in.
//
// Configuration, all from the environment:
//   PORT           0 or unset: any free port; a fixed port lets a test restart
//                  the provider on the same address (and so the same issuer).
//   URL_FILE       if set, the issuer URL is also written to this file.
//   CLIENT_ID      the relying party's client id (required).
//   CLIENT_SECRET  its secret, sent with client_secret_basic (required).
//   REDIRECT_URI   its one registered redirect URI (required).
//   PKCE_REQUIRED  "1" (default): every authorization request must carry an
//                  S256 code_challenge; "0": PKCE optional (still checked when
//                  sent, as oidc-provider always does).
//   OIDC_VERBOSE   "1": keep oidc-provider's own development-mode warnings.
//
// Once listening it prints exactly one line to stdout:
//   listening http://127.0.0.1:<port>
// and everything else (request log, errors) goes to stderr.
//
// Accounts: a login name N is the account with sub = N, email N@example.com
// (verified, unless N contains "unverified"), name N, and groups ["ops-admins"]
// if N contains "admin", ["ops-editors"] if N contains "editor",
// ["ops-viewers"] if N contains "viewer", else [].
//
// Test switch: POST /__test/remove?login=N (no authentication) answers 204 and
// takes N out of every group from then on (a person removed at the provider).
//
// Test switch: POST /__test/tamper-audience (no authentication) answers 204
// and makes the next token-endpoint answer that carries an id_token carry one
// re-signed with the same key and kid, but with aud = "intruder".

import { createServer } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';

import {
  generateKeyPair, exportJWK, decodeJwt, decodeProtectedHeader, SignJWT,
} from 'jose';

// --- Quiet oidc-provider's start-up notices -------------------------------
// oidc-provider announces its development-only defaults (dev interactions,
// in-memory adapter, "Unsupported runtime" on node 20, "you SHOULD change"
// defaults) through console.warn and console.info. console.info writes to
// stdout, which the tests read, so these notices are sent to stderr, and
// dropped entirely unless OIDC_VERBOSE=1. It must be done before
// oidc-provider is loaded (it warns at import time), hence the dynamic import.
const verbose = process.env.OIDC_VERBOSE === '1';
for (const method of ['info', 'warn', 'log']) {
  const original = method === 'warn' ? console.warn : console.error;
  console[method] = (...args) => {
    if (typeof args[0] === 'string' && args[0].startsWith('oidc-provider ')) {
      if (verbose) original(...args);
      return;
    }
    // Anything else printed by a library goes to stderr too: stdout carries
    // only the "listening" line.
    console.error(...args);
  };
}
const { default: Provider } = await import('oidc-provider');

// --- Configuration from the environment -----------------------------------
function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.mjs: environment variable ${name} is required`);
    process.exit(2);
  }
  return value;
}

const CLIENT_ID = required('CLIENT_ID');
const CLIENT_SECRET = required('CLIENT_SECRET');
const REDIRECT_URI = required('REDIRECT_URI');
const PORT = Number(process.env.PORT || 0);
const PKCE_REQUIRED = (process.env.PKCE_REQUIRED ?? '1') !== '0';
const HOST = '127.0.0.1';

// --- Signing key: a fresh RS256 pair at every start -----------------------
// A restart therefore publishes a new kid at the jwks endpoint, which the
// tests use to check that the relying party follows a key rotation.
const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingJwk = {
  ...await exportJWK(privateKey),
  kid: randomUUID(),
  alg: 'RS256',
  use: 'sig',
};

// --- Accounts: any login name is an account -------------------------------
const removed = new Set();
function claimsFor(login) {
  let groups = [];
  if (removed.has(login)) groups = [];
  else if (login.includes('admin')) groups = ['ops-admins'];
  else if (login.includes('editor')) groups = ['ops-editors'];
  else if (login.includes('viewer')) groups = ['ops-viewers'];
  return {
    sub: login,
    email: `${login}@example.com`,
    email_verified: !login.includes('unverified'),
    name: login,
    groups,
  };
}

const clientDefaults = {
  redirect_uris: [REDIRECT_URI],
  // refresh_token: central checks linked users between sign-ins with one.
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_basic',
};

const configuration = {
  clients: [
    { ...clientDefaults, client_id: CLIENT_ID, client_secret: CLIENT_SECRET },
    // A second, legitimate client: exists so that tests can speak of tokens
    // meant for another audience (see the tamper switch below).
    { ...clientDefaults, client_id: 'intruder', client_secret: 'intruder-secret' },
  ],

  jwks: { keys: [signingJwk] },

  // Cookie signing keys, new at each start (a restart ends the SSO session,
  // as all state is in memory anyway).
  cookies: { keys: [randomBytes(32).toString('base64url')] },

  async findAccount(ctx, sub) {
    return {
      accountId: sub,
      // oidc-provider filters these by the granted scopes / claims itself.
      async claims() { return claimsFor(sub); },
    };
  },

  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  // By default (true) oidc-provider puts scope-released claims only at the
  // userinfo endpoint when an access token is issued alongside the ID token
  // (which is always the case for response_type=code). false: the ID token
  // itself carries email, email_verified, name and groups.
  conformIdTokenClaims: false,

  pkce: { required: () => PKCE_REQUIRED },

  // A refresh token with every code exchange of a client allowed the grant (the default
  // wants `offline_access` with `prompt=consent`, which real providers ask in their own ways).
  async issueRefreshToken(_ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },

  // The built-in development login + consent pages (the default, spelled out).
  features: {
    devInteractions: { enabled: true },
  },

  // Set explicitly (they are the defaults or close to them) so that
  // oidc-provider does not nag about them.
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 3600,
    Session: 24 * 3600,
    Grant: 24 * 3600,
  },
};

// --- Start listening first, so that the issuer can name the real port -----
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(PORT, HOST, resolve);
});
const issuer = `http://${HOST}:${server.address().port}`;

const provider = new Provider(issuer, configuration);
provider.proxy = false; // plain http, no X-Forwarded-* trust

// Brief log of the provider's own error events (e.g. a replayed code).
for (const event of ['authorization.error', 'grant.error', 'userinfo.error',
  'end_session.error', 'jwks.error', 'discovery.error', 'server_error']) {
  provider.on(event, (ctx, err) => {
    console.error(`  ${event}: ${err.error || err.name}: ${err.error_detail || err.error_description || err.message}`);
  });
}

// Middleware 1: request log, one line a request, to stderr.
provider.use(async (ctx, next) => {
  const started = Date.now();
  try {
    await next();
  } finally {
    console.error(`${ctx.method} ${ctx.path} -> ${ctx.status} (${Date.now() - started} ms)`);
  }
});

// Middleware 2: strip the remote web-font @import (fonts.googleapis.com) from
// the built-in HTML pages, so a headless browser driving the login form
// makes no request off this machine.
provider.use(async (ctx, next) => {
  await next();
  if (typeof ctx.body === 'string' && ctx.response.is('html')) {
    ctx.body = ctx.body.replace(/@import url\(https?:[^)]*\);?/g, '');
  }
});

// Middleware 3: the audience-tampering test switch.
let tamperNextIdToken = false;
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/__test/remove') {
    removed.add(String(ctx.query.login));
    ctx.status = 204;
    return;
  }
  if (ctx.method === 'POST' && ctx.path === '/__test/tamper-audience') {
    tamperNextIdToken = true;
    ctx.status = 204;
    return;
  }
  await next();
  // After the token endpoint ran, its answer is still an object in ctx.body.
  if (tamperNextIdToken && ctx.path === '/token' && ctx.status === 200
      && ctx.body && typeof ctx.body.id_token === 'string') {
    tamperNextIdToken = false;
    const header = decodeProtectedHeader(ctx.body.id_token); // alg, kid, typ?
    const payload = decodeJwt(ctx.body.id_token);
    payload.aud = 'intruder'; // everything else, nonce included, unchanged
    ctx.body = {
      ...ctx.body,
      id_token: await new SignJWT(payload).setProtectedHeader(header).sign(privateKey),
    };
    console.error('  tamper-audience: id_token re-signed with aud=intruder');
  }
});

server.on('request', provider.callback());

if (process.env.URL_FILE) {
  // Written whole then renamed, so a test polling for it never reads half;
  // no trailing newline.
  const tmp = `${process.env.URL_FILE}.${process.pid}.tmp`;
  writeFileSync(tmp, issuer);
  renameSync(tmp, process.env.URL_FILE);
}
process.stdout.write(`listening ${issuer}\n`);

// Leave promptly and quietly when the test stops us.
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  });
}
