#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server from Debian's packages
# (`apt-get install postgresql`), with the server's URL in $PG_URL; the server and its files
# are gone afterwards. For benchmarks against PostgreSQL, e.g.:
#
#   scripts/with-postgres.sh sh -c 'cargo bench -p central --bench ingest -- --database-url "$PG_URL"'
#
# The server keeps PostgreSQL's default durability (fsync, synchronous_commit on), listens on a
# free loopback port and keeps its socket in its temp dir. initdb refuses to run as root, so as
# root the server runs as the `postgres` user.
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d)
as_postgres=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  as_postgres=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as_postgres[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_postgres[@]}" "$bin/postgres" -D "$dir/data" -p "$port" -k "$dir" \
  -c listen_addresses=127.0.0.1 -c max_connections=300 >"$dir/postgres.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" && break
  sleep 0.1
done
PG_URL="postgres://postgres@127.0.0.1:$port/postgres" "$@"
