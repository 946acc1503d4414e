#!/usr/bin/env bash
# A rush on a status page, beside nginx serving the same bytes from a static file, in one run
# (issue 71): `wrk -t2 -c64` against central's `/status/{slug}` for a page of 50 monitors (with an
# open incident and planned maintenance), then
# against nginx serving that page's HTML as a file. While central is rushed, an operator's status
# reads and a heartbeat monitor's pings are timed one after another (p50/p99), as they would be
# by people and jobs beside the rush. Installs nginx and wrk from Debian's packages when missing.
# Loopback only; every load is bounded in time. Release build of central.
#
#   scripts/bench-status-page.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN=${1:-10}

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx wrk
fi
cargo build --release -q -p central --bin central
CENTRAL_BIN=$PWD/target/release/central

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
chmod 755 "$WORK"   # nginx's workers read the page from here
cleanup() { kill "${CENTRAL_PID:-}" "${NGINX_PID:-}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

ADMIN=bench-admin-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
(
  cd "$WORK"
  exec env CENTRAL_LISTEN=127.0.0.1:0 CENTRAL_PORT_FILE="$WORK/port" \
    CENTRAL_DATABASE_URL="sqlite://$WORK/central.db" CENTRAL_ADMIN_TOKEN="$ADMIN" \
    RUST_LOG=warn "$CENTRAL_BIN" serve >"$WORK/central.log" 2>&1
) &
CENTRAL_PID=$!
for _ in $(seq 300); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
BASE=http://$(cat "$WORK/port")

# 50 heartbeat monitors (no agent needed), on one page; they are pinged in turn during the rush
# (each every 2 s: a monitor's pings are rate-limited).
python3 - "$BASE" "$ADMIN" "$WORK" <<'PY'
import json, sys, urllib.request
base, admin, work = sys.argv[1:4]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + admin, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)
made = [call("POST", "/api/v1/monitors", {"name": f"service-{i}", "kind": "heartbeat",
        "target": "job", "interval_ms": 60000}) for i in range(50)]
ids = [m["id"] for m in made]
page = call("POST", "/api/v1/status-pages", {"slug": "bench", "title": "Bench status",
     "sections": [{"name": "Services", "monitor_ids": ids}]})
# An open incident with three updates, and planned maintenance, as a page in a rush has.
incident = call("POST", f"/api/v1/status-pages/{page['id']}/incidents", {
    "title": "Elevated errors", "monitor_ids": ids[:3],
    "message": "**Some** requests fail; we are looking into it."})
for status in ["identified", "monitoring"]:
    call("POST", f"/api/v1/status-pages/{page['id']}/incidents/{incident['id']}/updates",
         {"status": status, "message": f"Now {status}: see [the notes](https://example.com)."})
import datetime
starts = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=5)
call("POST", "/api/v1/maintenance-windows", {"name": "db upgrade", "monitor_ids": ids[:10],
     "starts_at": starts.isoformat(), "ends_at": (starts + datetime.timedelta(hours=1)).isoformat()})
open(work + "/ids", "w").write(ids[1])
open(work + "/pings", "w").write("\n".join(m["ping_url"] for m in made))
PY
curl -sf "$BASE/status/bench" -o "$WORK/page.html"
curl -sf -H 'Accept-Encoding: gzip' "$BASE/status/bench" -o "$WORK/page.html.gz"

NGINX_PORT=$(free_port)
cat >"$WORK/nginx.conf" <<CONF
daemon off; worker_processes 2; pid $WORK/nginx.pid; error_log $WORK/nginx.err;
events { worker_connections 1024; }
http { access_log off; types { text/html html; }
  server { listen 127.0.0.1:$NGINX_PORT; root $WORK; default_type text/html;
    location = /plain { try_files /page.html =404; }
    location = /gzip { add_header Content-Encoding gzip; try_files /page.html.gz =404; } } }
CONF
nginx -c "$WORK/nginx.conf" & NGINX_PID=$!
sleep 0.5

# timed NAME URLS_FILE|URL SECONDS [BEARER]: requests one after another (in turn over the URLs of
# a file, or to one URL) until the rush ends; prints p50/p99 and what was refused.
timed() {
  python3 - "$@" <<'PY' &
import os, sys, time, urllib.error, urllib.request
name, where, until = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
urls = open(where).read().split() if os.path.exists(where) else [where]
headers = {"Authorization": "Bearer " + sys.argv[4]} if len(sys.argv) > 4 else {}
took, refused, i = [], {}, 0
while time.time() < until:
    url = urls[i % len(urls)]; i += 1
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
            r.read()
    except urllib.error.HTTPError as e:
        refused[e.code] = refused.get(e.code, 0) + 1
    took.append((time.perf_counter() - start) * 1000)
    time.sleep(0.04)
took.sort()
print(f"  {name:<22} {len(took):5d} requests   p50 {took[len(took)//2]:7.1f} ms   p99 {took[int(len(took)*0.99)]:7.1f} ms   refused {refused or 'none'}")
PY
}
sed -i "s|^/ping/|$BASE/ping/|" "$WORK/pings"

rush() {  # rush LABEL URL [HEADER]
  echo "$1"
  wrk -t2 -c64 -d"${SECONDS_RUN}s" ${3:+-H "$3"} "$2" | grep -E "Requests/sec|Non-2xx|Latency|Transfer/sec"
}
echo "page of 50 monitors: $(wc -c <"$WORK/page.html") bytes, $(wc -c <"$WORK/page.html.gz") gzipped; wrk -t2 -c64 -d${SECONDS_RUN}s"
timed "operator status read" "$BASE/api/v1/monitors/$(cat "$WORK/ids")/status" "$SECONDS_RUN" "$ADMIN"
OPERATOR=$!
timed "heartbeat pings" "$WORK/pings" "$SECONDS_RUN"
PINGS=$!
rush "central /status/bench, with an operator's status reads and heartbeat pings beside it:" "$BASE/status/bench"
wait "$OPERATOR" "$PINGS"
rush "nginx, the same bytes from a file:" "http://127.0.0.1:$NGINX_PORT/plain"
rush "central /status/bench, gzip:" "$BASE/status/bench" "Accept-Encoding: gzip"
rush "nginx, the same gzipped bytes from a file:" "http://127.0.0.1:$NGINX_PORT/gzip" "Accept-Encoding: gzip"
