#!/usr/bin/env bash
# Fuzzes central's HTTP APIs with schemathesis, driven by the OpenAPI document central serves at
# /api/openapi.json. Starts a fresh central (temporary database, loopback, random port), then:
#   run 1: the settings API (/api/v1/...)      with the admin token,
#   run 2: the poller API   (/api/poller/...)  with a registered poller's access token,
#   run 3: visitors' pages  (/status/..., /badge/...) of a public status page,
# each with every check and every phase (examples, coverage, fuzzing; stateful on the settings API,
# the only one with links), and no hooks: the document alone says what central accepts
# (scripts/schemathesis.toml says which statuses count as a refusal and an acceptance). Long
# polls and operators' commands are answered at once (CENTRAL_MAX_LONG_POLLS=0,
# CENTRAL_MAX_COMMAND_WAIT=0s: its pollers never answer), so a valid `wait` costs no time. All
# runs always execute; the script exits non-zero if any fails. JUnit reports go to
# target/fuzz-api/.
#
#   scripts/fuzz-api.sh
#
# Environment:
#   CENTRAL_BIN        central binary (default: target/debug/central; build it first)
#   ST                 schemathesis command (default: st, e.g. from `pip install schemathesis==4.32.5`)
#   FUZZ_MAX_EXAMPLES  test cases per operation and phase (default 30)
#   FUZZ_SEED          schemathesis seed (default 1, so runs are reproducible)
#   FUZZ_TIMEOUT       per-request timeout in seconds (default 10)
#   FUZZ_ST_ARGS       extra `st run` arguments for both runs, split on spaces
#                      (e.g. "--continue-on-failure" to see every failure, not the first per operation)
set -euo pipefail
shopt -s inherit_errexit

# A relative CENTRAL_BIN given by the caller is taken relative to the caller's directory.
if [[ -n "${CENTRAL_BIN:-}" && "$CENTRAL_BIN" != /* && "$CENTRAL_BIN" == */* ]]; then
  CENTRAL_BIN="$PWD/$CENTRAL_BIN"
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
CENTRAL_BIN=${CENTRAL_BIN:-$ROOT/target/debug/central}
ST=${ST:-st}
FUZZ_MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-30}
FUZZ_SEED=${FUZZ_SEED:-1}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
read -r -a EXTRA_ARGS <<<"${FUZZ_ST_ARGS:-}"
CONFIG=$ROOT/scripts/schemathesis.toml
REPORTS=$ROOT/target/fuzz-api

[[ -x "$CENTRAL_BIN" ]] || { echo "fuzz-api: no central binary at $CENTRAL_BIN (cargo build -p central, or set CENTRAL_BIN)" >&2; exit 2; }
command -v "$ST" >/dev/null || { echo "fuzz-api: schemathesis ('$ST') not found; pip install schemathesis==4.32.5, or set ST" >&2; exit 2; }

# Everything central and schemathesis write (database, log, caches) stays in $WORK; schemathesis
# runs with $WORK as its working directory. Only the JUnit reports land in the repository.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-api.XXXXXX")
LOG=$WORK/central.log
CENTRAL_PID=
ST_PID=
cleanup() {
  local rc=$?
  if [[ -n "$ST_PID" ]]; then
    kill "$ST_PID" 2>/dev/null || true
    wait "$ST_PID" 2>/dev/null || true
  fi
  if [[ -n "$CENTRAL_PID" ]]; then
    kill "$CENTRAL_PID" 2>/dev/null || true
    wait "$CENTRAL_PID" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -s "$LOG" ]]; then
    echo "== last 40 lines of central's log ($LOG)" >&2
    tail -n 40 "$LOG" >&2 || true
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Per-client and per-poller limits are off: the fuzzer judges each request on its own, and its
# thousands of 401s from one address would rightly lock that address out, as its hundreds of
# heartbeats a minute would its poller (429, which the schema states). No long poll is held
# (a `wait` is answered at once, as when central holds its most), so the run takes seconds.
# A public address is set so that visitors' subscriptions are taken (every notice carries
# links to it); their confirmations reach nobody, since strangers' webhooks may reach no
# network unless CENTRAL_SUBSCRIBER_ALLOWED_NETWORKS says so, and no mail server is set.
ADMIN=$(python3 -c 'import secrets; print("fuzz-admin-" + secrets.token_hex(16))')
(
  cd "$WORK"
  exec env CENTRAL_LISTEN=127.0.0.1:0 \
    CENTRAL_PORT_FILE="$WORK/port" \
    CENTRAL_DATABASE_URL="sqlite://$WORK/central.db" \
    CENTRAL_ADMIN_TOKEN="$ADMIN" \
    CENTRAL_NOTIFY_ALLOWED_NETWORKS=127.0.0.0/8 \
    CENTRAL_AUTH_RATE_LIMIT=0 \
    CENTRAL_AUTH_FAILURES_PER_MINUTE=0 \
    CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE=0 \
    CENTRAL_POLLER_HEARTBEATS_PER_MINUTE=0 \
    CENTRAL_MAX_LONG_POLLS=0 \
    CENTRAL_MAX_COMMAND_WAIT=0s \
    CENTRAL_PUBLIC_URL=https://status.example.com \
    RUST_LOG="${RUST_LOG:-info}" \
    "$CENTRAL_BIN" serve >"$LOG" 2>&1
) &
CENTRAL_PID=$!

for _ in $(seq 300); do
  [[ -s "$WORK/port" ]] && break
  kill -0 "$CENTRAL_PID" 2>/dev/null || { echo "fuzz-api: central exited during start-up" >&2; exit 1; }
  sleep 0.1
done
[[ -s "$WORK/port" ]] || { echo "fuzz-api: central wrote no port file within 30 s" >&2; exit 1; }
ADDR=$(cat "$WORK/port")   # host:port
BASE=http://$ADDR
SCHEMA=$BASE/api/openapi.json
echo "fuzz-api: central $CENTRAL_BIN on $BASE (work dir $WORK)"

# json_field FIELD: prints FIELD of the JSON object on stdin.
json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# new_poller NAME [FIELD]: makes a registration token with the admin token, registers a poller
# NAME with it, and prints the poller's access token (or FIELD of the answer: `poller_id`).
new_poller() {
  local reg
  reg=$(curl -sS --fail-with-body -X POST "$BASE/api/v1/registration-tokens" \
      -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
      -d '{"name":"fuzz","max_uses":1000}' | json_field token)
  curl -sS --fail-with-body -X POST "$BASE/api/poller/register" -H 'Content-Type: application/json' \
      -d "{\"registration_token\":\"$reg\",\"name\":\"$1\",\"capabilities\":[\"http\"],\"version\":\"fuzz\"}" \
    | json_field "${2:-access_token}"
}

# A poller and a monitor exist during the settings run, so that /api/v1/pollers/... has
# something to work on, and bodies that must name an existing object (a maintenance window's
# monitors and pollers, a managed object's id) can: their ids go into the run's configuration
# as dictionaries (scripts/schemathesis.toml binds them to those fields, half the time).
POLLER_ID=$(new_poller fuzz-poller poller_id)
MONITOR_ID=$(curl -sS --fail-with-body -X POST "$BASE/api/v1/monitors" \
    -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name":"fuzz","kind":"tcp","target":"127.0.0.1:9","interval_ms":60000,"timeout_ms":1000}' \
  | json_field id)
RUN_CONFIG=$WORK/schemathesis.toml
{
  cat "$CONFIG"
  printf '\n# Added by scripts/fuzz-api.sh for this run: objects that exist.\n'
  printf '[dictionaries.existing_monitor]\nvalues = ["%s"]\n' "$MONITOR_ID"
  printf '[dictionaries.existing_poller]\nvalues = ["%s"]\n' "$POLLER_ID"
} >"$RUN_CONFIG"
CONFIG=$RUN_CONFIG

mkdir -p "$REPORTS"
# run_st NAME PATH_REGEX TOKEN PHASES: one schemathesis run; records its exit code and duration.
declare -A RC SECS
run_st() {
  local name=$1 regex=$2 token=$3 phases=$4 start rc=0
  echo
  echo "== schemathesis: $name API ($regex), $FUZZ_MAX_EXAMPLES examples per operation, seed $FUZZ_SEED"
  rm -f "$REPORTS/$name.xml"
  start=$(date +%s)
  (
    cd "$WORK"
    exec "$ST" --config-file "$CONFIG" run "$SCHEMA" \
      --url "$BASE" \
      -H "Authorization: Bearer $token" \
      --include-path-regex "$regex" \
      --checks all \
      --phases "$phases" \
      --max-examples "$FUZZ_MAX_EXAMPLES" \
      --workers 1 \
      --seed "$FUZZ_SEED" \
      --generation-database none \
      --request-timeout "$FUZZ_TIMEOUT" \
      --wait-for-schema 30 \
      --report-junit-path "$REPORTS/$name.xml" \
      --no-color \
      ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}
  ) &
  # In the background, so that a signal to this script ends the run at once (cleanup kills it).
  ST_PID=$!
  wait "$ST_PID" || rc=$?
  ST_PID=
  RC[$name]=$rc
  SECS[$name]=$(( $(date +%s) - start ))
}

run_st settings '^/api/v1/' "$ADMIN" examples,coverage,fuzzing,stateful
# The settings run may have deleted or disabled the first poller: use a fresh one.
POLLER_TOKEN=$(new_poller fuzz-poller-2)
# The poller API has no links between its operations (no create/read pairs): no stateful phase.
run_st poller '^/api/poller/' "$POLLER_TOKEN" examples,coverage,fuzzing

# Visitors' operations (status pages, badges): a public page showing a fresh monitor (the
# settings run may have deleted the first), which half the generated slugs and monitor ids
# name (scripts/schemathesis.toml binds them), so that the pages are rendered, not only
# refused. No credential is needed; the admin token riding along changes nothing.
PUBLIC_MONITOR=$(curl -sS --fail-with-body -X POST "$BASE/api/v1/monitors" \
    -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name":"fuzz-public","kind":"tcp","target":"127.0.0.1:9","interval_ms":60000,"timeout_ms":1000}' \
  | json_field id)
curl -sS --fail-with-body -o /dev/null -X POST "$BASE/api/v1/status-pages" \
    -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"slug\":\"fuzz\",\"title\":\"Fuzz\",\"visibility\":\"public\",\"sections\":[{\"name\":\"All\",\"monitor_ids\":[\"$PUBLIC_MONITOR\"]}]}"
{
  printf '[dictionaries.existing_slug]\nvalues = ["fuzz"]\n'
  printf '[dictionaries.shown_monitor]\nvalues = ["%s"]\n' "$PUBLIC_MONITOR"
  printf '[[operations]]\ninclude-path-regex = "^/status/"\n'
  printf 'parameters = { "path.slug" = { dictionary = "existing_slug", probability = 0.5 } }\n'
  printf '[[operations]]\ninclude-path-regex = "^/badge/"\n'
  printf 'parameters = { "path.monitor_id" = { dictionary = "shown_monitor", probability = 0.5 } }\n'
} >>"$CONFIG"
run_st public '^/(status|badge)/' "$ADMIN" examples,coverage,fuzzing

# summary NAME: one line per run (counts from its JUnit report, when there is one).
summary() {
  local name=$1 rc=${RC[$1]} verdict counts="no JUnit report"
  case $rc in
    0) verdict=passed ;;
    1) verdict=FAILED ;;
    *) verdict="ERROR (exit $rc)" ;;
  esac
  if [[ -s "$REPORTS/$name.xml" ]]; then
    counts=$(python3 - "$REPORTS/$name.xml" <<'PY' || true
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
bad = lambda tag: sum(1 for c in cases if c.find(tag) is not None)
print(f"{len(cases)} JUnit cases, {bad('failure')} failed, {bad('error')} errored: target/fuzz-api/{sys.argv[1].rsplit('/', 1)[1]}")
PY
)
  fi
  printf 'fuzz-api: %-8s %-16s %4ss  %s\n' "$name" "$verdict" "${SECS[$name]}" "$counts"
}
echo
summary settings
summary poller
summary public
# 0 when every run passed, else the largest exit code (1: failures found; 2: schemathesis error).
worst=0
for name in settings poller public; do
  (( RC[$name] > worst )) && worst=${RC[$name]}
done
exit "$worst"
