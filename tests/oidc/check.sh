#!/usr/bin/env bash
# Hand check of the test OpenID provider, without central: starts provider.mjs,
# drives authorization code + PKCE with curl (as a browser would: cookie jar,
# login form, consent form), redeems the code, decodes the ID token; then the
# same with the tamper-audience switch on, and a replayed code.
# Needs node, curl; run `npm ci --prefix tests/oidc` first.
# Usage: bash tests/oidc/check.sh
set -euo pipefail
cd "$(dirname "$0")"

WORK=$(mktemp -d)
CLIENT_ID=central CLIENT_SECRET=central-secret REDIRECT_URI=http://127.0.0.1:9/cb \
  URL_FILE="$WORK/url" node provider.mjs >"$WORK/stdout" 2>"$WORK/stderr" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do [ -s "$WORK/url" ] && break; sleep 0.1; done
ISS=$(cat "$WORK/url")
echo "stdout of provider: $(cat "$WORK/stdout")"

echo "== discovery"
curl -fsS "$ISS/.well-known/openid-configuration" | node -e '
  const d = JSON.parse(require("fs").readFileSync(0, "utf8"));
  for (const k of ["issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint"]) console.log(k, d[k]);'

b64url() { node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("base64url"))'; }
s256() { node -e 'process.stdout.write(require("crypto").createHash("sha256").update(process.argv[1]).digest("base64url"))' "$1"; }
# Decode an ID token, and check its signature against the provider's jwks_uri.
decode() { node --input-type=module -e '
  import { createRemoteJWKSet, jwtVerify, decodeProtectedHeader, decodeJwt } from "jose";
  const [token, iss] = process.argv.slice(1);
  console.log(JSON.stringify({ header: decodeProtectedHeader(token), payload: decodeJwt(token) }, null, 1));
  await jwtVerify(token, createRemoteJWKSet(new URL(iss + "/jwks")), { issuer: iss });
  console.log("signature valid against", iss + "/jwks");' "$1" "$ISS"; }
# Location header of the last response in file $1
location() { tr -d '\r' <"$1" | sed -n 's/^[Ll]ocation: //p' | tail -1; }

# One login: prints the redirect back to the RP (…/cb?code=…&state=…&iss=…).
login() { # $1 login name, $2 state, $3 nonce, $4 code_challenge
  local jar="$WORK/jar.$2" url
  url="$ISS/auth?client_id=central&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb"
  url+="&scope=openid%20email%20profile%20groups&state=$2&nonce=$3&code_challenge=$4&code_challenge_method=S256"
  for _ in $(seq 10); do
    curl -sS -c "$jar" -b "$jar" -D "$WORK/h" -o "$WORK/body" "$url"
    case "$url" in
      "$ISS"/interaction/*) # an interaction page: submit its form
        if grep -q 'name="prompt" value="login"' "$WORK/body"; then
          curl -sS -c "$jar" -b "$jar" -D "$WORK/h" -o /dev/null "$url" \
            --data-urlencode prompt=login --data-urlencode "login=$1" --data-urlencode password=anything
        else
          curl -sS -c "$jar" -b "$jar" -D "$WORK/h" -o /dev/null "$url" --data-urlencode prompt=consent
        fi ;;
    esac
    url=$(location "$WORK/h")
    case "$url" in /*) url="$ISS$url" ;; esac
    echo "  -> $url" >&2
    case "$url" in http://127.0.0.1:9/cb*) echo "$url"; return ;; esac
  done
  echo "no redirect to the RP" >&2; return 1
}
param() { node -e 'console.log(new URL(process.argv[1]).searchParams.get(process.argv[2]))' "$1" "$2"; }
redeem() { # $1 code, $2 verifier -> token response JSON
  curl -sS -u central:central-secret "$ISS/token" \
    --data-urlencode grant_type=authorization_code --data-urlencode "code=$1" \
    --data-urlencode redirect_uri=http://127.0.0.1:9/cb --data-urlencode "code_verifier=$2"
}
id_token() { node -e 'console.log(JSON.parse(process.argv[1]).id_token)' "$1"; }

echo "== flow 1: alice-admin"
V=$(b64url); BACK=$(login alice-admin state1 nonce1 "$(s256 "$V")")
CODE=$(param "$BACK" code); echo "state=$(param "$BACK" state) iss=$(param "$BACK" iss)"
TOK=$(redeem "$CODE" "$V"); decode "$(id_token "$TOK")"
echo "== same code again (replay)"
redeem "$CODE" "$V"; echo

echo "== flow 2: bob-editor, tamper-audience switch on"
curl -sS -o /dev/null -w 'POST /__test/tamper-audience -> %{http_code}\n' -X POST "$ISS/__test/tamper-audience"
V=$(b64url); BACK=$(login bob-editor state2 nonce2 "$(s256 "$V")")
TOK=$(redeem "$(param "$BACK" code)" "$V"); decode "$(id_token "$TOK")"

echo "== flow 3: no PKCE is refused"
curl -sS -o /dev/null -w '%{http_code} %{redirect_url}\n' \
  "$ISS/auth?client_id=central&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&scope=openid&state=s3&nonce=n3"

echo "== provider stderr"
cat "$WORK/stderr"
