#!/usr/bin/env bash
# Compares our engine with Prometheus' blackbox_exporter on the same local HTTP target, in one
# run: probes (checks) per second and per CPU-second. Installs blackbox_exporter and wrk from
# Debian's packages when missing. Loopback only; every load is bounded in time.
#
#   scripts/bench-blackbox.sh [seconds] [monitors]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN=${1:-20}
MONITORS=${2:-10000}

if ! command -v prometheus-blackbox-exporter >/dev/null || ! command -v wrk >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus-blackbox-exporter wrk
fi
cargo bench -p poller-agent --bench engine --no-run -q 2>/dev/null
BENCH=$(ls -t target/release/deps/engine-* | grep -v '\.d$' | head -n 1)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TARGET_PORT=$(free_port); BLACKBOX_PORT=$(free_port)
WORK=$(mktemp -d)
cleanup() { kill "${TARGET_PID:-}" "${BLACKBOX_PID:-}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$BENCH" --serve-target "$TARGET_PORT" & TARGET_PID=$!
cat > "$WORK/blackbox.yml" <<YAML
modules:
  http_2xx:
    prober: http
    timeout: 5s
    http:
      preferred_ip_protocol: ip4
YAML
prometheus-blackbox-exporter --config.file="$WORK/blackbox.yml" \
  --web.listen-address="127.0.0.1:$BLACKBOX_PORT" --log.level=error & BLACKBOX_PID=$!
sleep 1

echo "== blackbox_exporter: wrk drives /probe for ${SECONDS_RUN}s (each probe is one check, fresh connection)"
before=$(cpu_ticks "$BLACKBOX_PID")
wrk -t 2 -c 64 -d "${SECONDS_RUN}s" \
  "http://127.0.0.1:$BLACKBOX_PORT/probe?target=http://127.0.0.1:$TARGET_PORT/&module=http_2xx" > "$WORK/wrk.txt"
after=$(cpu_ticks "$BLACKBOX_PID")
rate=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
cpu=$(python3 -c "print(($after - $before) / 100)")
python3 - "$rate" "$cpu" "$SECONDS_RUN" <<'PY'
import sys
rate, cpu, secs = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"blackbox_exporter   {rate:8.0f} checks/s   {rate * secs / max(cpu, 1e-9):8.0f} checks per CPU-second   ({cpu:.1f} CPU-s)")
PY

echo "== poller-agent engine: $MONITORS monitors at 5 s for ${SECONDS_RUN}s against the same target"
"$BENCH" --target "http://127.0.0.1:$TARGET_PORT" --monitors "$MONITORS" --interval 5s --duration "${SECONDS_RUN}s"
