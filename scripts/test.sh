#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine and runs them all: the unit and
# end-to-end tests (SQLite), the end-to-end suite again with central on PostgreSQL (with the
# replica tests behind HAProxy), the upgrade from the previous release, the deploy images run
# with podman, the deploy files' validation and the API fuzzer. `.ci/run`
# calls this script; a newcomer runs it the same way (as root, or with sudo available).
#
#   scripts/test.sh            everything, as CI runs it
#   scripts/test.sh --quick    install, then only `cargo test --workspace` (SQLite)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[[ "${1:-}" == "--quick" ]] && quick=true

as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

# Each phase's time, printed as it ends and again at the end (CI's budget is read from these).
started_all=$SECONDS
phase_started=$SECONDS
phases=()
phase() {
  local took=$(( SECONDS - phase_started ))
  phases+=("$(printf '%-40s %4d s' "$1" "$took")")
  echo "== phase: $1 took ${took} s" >&2
  phase_started=$SECONDS
}
long_pid=
previous_pid=
upgrade_pid=
images_pid=
summary() {
  local rc=$?
  for pid in $long_pid $previous_pid $upgrade_pid $images_pid; do kill "$pid" 2>/dev/null; done
  echo "== phases (exit $rc):" >&2
  for line in "${phases[@]}"; do echo "   $line" >&2; done
  echo "   $(printf '%-40s %4d s' total $(( SECONDS - started_all )))" >&2
}
trap summary EXIT

# Waits for a job started beside the suites: on failure prints its log and stops the run, else
# prints the log's lines matching `shown`.
waited() {
  local pid=$1 log=$2 what=$3 shown=$4
  if ! wait "$pid"; then
    cat "$log" >&2
    echo "$what failed ($log)" >&2
    exit 1
  fi
  grep -h "$shown" "$log" >&2 || true
}

# Debian's packages: PostgreSQL (servers started by the tests themselves, as the postgres user,
# in temp dirs; no system service), HAProxy (started by the tests with a config they
# write), docker-compose (to validate the deploy files; no Docker engine runs here), Chromium with
# its WebDriver (the web page's tests drive a headless browser), Alertmanager (the Alertmanager
# channel is tested against the real one), Prometheus for `promtool check metrics` (central's
# /metrics after hostile names), python3-venv for the fuzzer, curl (heartbeat monitors' jobs
# ping with it), iproute2, nftables and procps (the icmp test, below), and podman (with
# catatonit, its pods' init) and debootstrap, which build and run the deploy images
# (images.rs: no Docker engine runs here, and the images' Debian base is made from Debian's
# packages), aiosmtpd, the SMTP server mail is sent to (tests/src/receivers.rs), and
# feedparser, the feed reader status pages' Atom feeds are read with (status_incidents.rs).
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
command -v prometheus-alertmanager >/dev/null || [ -x /usr/bin/prometheus-alertmanager ] || missing+=(prometheus-alertmanager)
command -v promtool >/dev/null || missing+=(prometheus)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
command -v curl >/dev/null || missing+=(curl)
# node and npm run the single sign-on tests' OpenID provider (below).
command -v npm >/dev/null || missing+=(nodejs npm)
# The icmp test makes a network namespace whose firewall drops ICMP, and sets
# net.ipv4.ping_group_range for its unprivileged agent.
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || missing+=(iproute2)
command -v nft >/dev/null || [ -x /usr/sbin/nft ] || missing+=(nftables)
command -v sysctl >/dev/null || [ -x /usr/sbin/sysctl ] || missing+=(procps)
command -v podman >/dev/null || missing+=(podman)
command -v catatonit >/dev/null || [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
/usr/bin/python3 -c 'import aiosmtpd' 2>/dev/null || missing+=(python3-aiosmtpd)
/usr/bin/python3 -c 'import feedparser' 2>/dev/null || missing+=(python3-feedparser)
if (( ${#missing[@]} )); then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The single sign-on tests' OpenID provider: the certified `oidc-provider` from npm, pinned
# by tests/oidc/package-lock.json, run with the machine's node (tests/src/oidc.rs).
npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
# axe-core, which the browser tests run over status pages (tests/src/browser.rs), pinned by
# tests/axe/package-lock.json.
npm ci --prefix tests/axe --no-audit --no-fund --loglevel=error
phase "install"

# The end-to-end tests mostly wait (for intervals, outages, long polls): four at a time keep
# the two cores about half busy (load average under 1) and take the SQLite suite's tests from
# ~620 s to ~350 s. Set RUST_TEST_THREADS to choose another number.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-4}

# A twelve-minute outage (issue 68, uptime.rs) takes twelve minutes on any machine: it runs
# beside the suites from the moment its binary is built (from tests/, as cargo runs it, with
# E2E_LONG=1; without it the test returns at once) and is waited for at the end.
if ! $quick; then
  cargo test --workspace --test e2e --no-run
  e2e_bin=$(cargo test --workspace --test e2e --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "e2e" and m.get("executable"):
        print(m["executable"])' | tail -n 1)
  [[ -x "$e2e_bin" ]] || { echo "no e2e test binary found" >&2; exit 1; }
  (cd tests && E2E_LONG=1 exec "$e2e_bin" --exact \
    uptime::a_twelve_minute_outage_is_seen_over_within_one_interval) >target/long-outage.log 2>&1 &
  long_pid=$!
  # The previous release's binaries for the upgrade test (upgrade.rs), built from its tag
  # beside the suites at the lowest priority (the suites mostly wait), cached in target/.
  nice -n 19 scripts/previous-release.sh >target/previous-release.out 2>target/previous-release.log &
  previous_pid=$!
fi
cargo test --workspace
phase "unit and end-to-end tests (SQLite)"
$quick && exit 0

# The end-to-end suite once more, with central on PostgreSQL (tests/src/postgres.rs), and the
# replica tests that only PostgreSQL can run (ignored in the SQLite run), HAProxy in front.
# `--workspace` as above, so the features match and nothing is built again.
E2E_DATABASE=postgres cargo test --workspace --test e2e -- --include-ignored
phase "end-to-end tests (PostgreSQL, replicas)"

# The upgrade from the previous release (upgrade.rs), once its binaries are built; it runs
# beside the deploy files' check and the fuzzer and is waited for after them.
waited "$previous_pid" target/previous-release.log "building the previous release" "built in"
previous_pid=
phase "previous release built (waited for; built beside the suites)"
# The fleet's upgrade on SQLite, then the replicas' rolling upgrade on PostgreSQL.
(cd tests && export E2E_PREVIOUS_RELEASE_BIN=$(cat ../target/previous-release.out) &&
  "$e2e_bin" --exact upgrade::a_fleet_of_the_previous_release_upgrades_without_losing_a_result \
    --nocapture &&
  E2E_DATABASE=postgres "$e2e_bin" --exact --include-ignored --nocapture \
    upgrade::a_rolling_upgrade_of_two_replicas_loses_nothing_and_tells_each_change_once) \
  >target/upgrade.log 2>&1 &
upgrade_pid=$!
# The deploy images run for real (images.rs): their run stages built with podman on a Debian
# base from debootstrap (made once, kept in podman's store), central and two agents as the
# compose file sets them up, and the previous release's agent image beside them.
(cd tests && export E2E_IMAGES=1 E2E_PREVIOUS_RELEASE_BIN=$(cat ../target/previous-release.out) &&
  "$e2e_bin" --exact images::the_images_run_a_fleet_as_the_compose_file_sets_it_up --nocapture) \
  >target/images.log 2>&1 &
images_pid=$!

# The compose files must interpolate with the secrets set, and refuse to without them; the
# proxy's configuration must be valid HAProxy.
for compose in deploy/compose.yaml deploy/compose.ha.yaml; do
  CENTRAL_ADMIN_TOKEN=ci-admin-token-0123456789 REGISTRATION_TOKEN=ci-registration-0123456789 \
    POSTGRES_PASSWORD=ci-postgres-password \
    docker-compose --env-file deploy/example.env -f "$compose" config -q
  if docker-compose --env-file deploy/example.env -f "$compose" config -q 2>/dev/null; then
    echo "$compose: accepted without its secrets" >&2
    exit 1
  fi
done
haproxy -q -c -f deploy/haproxy.cfg
phase "deploy files"

# schemathesis from PyPI, pinned (the fuzzer's config and hooks follow its 4.x interface), in a
# virtualenv of its own under target/.
VENV=$PWD/target/ci-venv
if ! "$VENV/bin/st" --version >/dev/null 2>&1; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet schemathesis==4.32.5
fi
ST="$VENV/bin/st" CENTRAL_BIN=target/debug/central scripts/fuzz-api.sh
phase "API fuzzer"

waited "$upgrade_pid" target/upgrade.log "the upgrades from the previous release" \
  "stored once\|test result"
upgrade_pid=
phase "upgrades from the previous release (beside the fuzzer)"

waited "$images_pid" target/images.log "the deploy images' test" "test result"
images_pid=
phase "deploy images with podman (beside the fuzzer)"

waited "$long_pid" target/long-outage.log "the twelve-minute outage test" \
  "after a 12-minute outage\|test result"
long_pid=
phase "twelve-minute outage (waited for; ran beside the suites)"
