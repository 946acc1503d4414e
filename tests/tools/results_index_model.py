#!/usr/bin/env python3
"""What SQLite's per-monitor results index costs a result, and what building it in bulk would.

    python3 tests/tools/results_index_model.py MODE [MONITORS] [MINUTES]

MODE is `index` (today: `results_monitor_ts` written by every result), `none` (no per-monitor
index at all: the floor) or `head` (the index written only in bulk, in key order, every
`FLUSH` minutes (environment, default 10) in transactions of `CHUNK` entries (default 5,000),
as docs/results-head.md proposes). A model of central's ingest writes on SQLite, not central:
Python's sqlite3 with the same WAL mode, `synchronous = NORMAL` and 64 MiB page cache, the
tables a steady result writes (its row, its status row, its due row, its hour and day rollup
rows), 200 pollers each uploading its monitors 50 at a time, a result per monitor per minute.
The second half of the simulated minutes is measured: CPU (user and system) per result, write
calls and bytes per result (`/proc/self/io`). The Python interpreter's own work is in the
figures too, the same in every mode: compare modes, not absolute values.
"""
import os
import random
import resource
import sqlite3
import sys
import tempfile
import time
import uuid

MODE = sys.argv[1]
MONITORS = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
MINUTES = int(sys.argv[3]) if len(sys.argv) > 3 else 20
FLUSH = int(os.environ.get("FLUSH", "10"))
CHUNK = int(os.environ.get("CHUNK", "5000"))
POLLERS = 200
BATCH = 50

SCHEMA = """
CREATE TABLE results (id TEXT PRIMARY KEY, monitor_id TEXT NOT NULL, poller_id TEXT NOT NULL,
  ts BIGINT NOT NULL, status TEXT NOT NULL, latency_ms BIGINT, msg TEXT NOT NULL,
  meta TEXT NOT NULL, received_at BIGINT NOT NULL);
CREATE TABLE monitor_status (monitor_id TEXT PRIMARY KEY, status TEXT NOT NULL,
  poller_id TEXT NOT NULL, last_result_id TEXT NOT NULL, last_result_at BIGINT NOT NULL,
  latency_ms BIGINT, message TEXT NOT NULL);
CREATE TABLE alert_due (monitor_id TEXT PRIMARY KEY, due_at BIGINT NOT NULL,
  marks BIGINT NOT NULL DEFAULT 0);
CREATE INDEX alert_due_at ON alert_due (due_at);
CREATE TABLE rollups (monitor_id TEXT NOT NULL, region TEXT NOT NULL, resolution TEXT NOT NULL,
  bucket_start BIGINT NOT NULL, up BIGINT NOT NULL DEFAULT 0, total BIGINT NOT NULL DEFAULT 0,
  latency_sum BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (monitor_id, region, resolution, bucket_start));
"""
INDEX = {
    "index": "CREATE INDEX results_monitor_ts ON results (monitor_id, ts, id);",
    "none": "",
    "head": "CREATE TABLE result_index (monitor_id TEXT NOT NULL, ts BIGINT NOT NULL, "
    "rid INTEGER NOT NULL, PRIMARY KEY (monitor_id, ts, rid)) WITHOUT ROWID;",
}[MODE]
META = '{"http":{"status":200,"bytes":1234},"phase":{"dns":1,"connect":2,"tls":3,"ttfb":4}}'


def io_counters():
    fields = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    return int(fields["syscw"]), int(fields["wchar"])


def main():
    directory = tempfile.mkdtemp()
    db = sqlite3.connect(os.path.join(directory, "model.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA cache_size = -65536")
    db.executescript(SCHEMA + INDEX)
    monitors = [str(uuid.uuid4()) for _ in range(MONITORS)]
    pollers = [str(uuid.uuid4()) for _ in range(POLLERS)]
    per_poller = MONITORS // POLLERS
    head = []
    sequence = 0

    def upload(poller, batch, ts):
        nonlocal sequence
        rows = []
        for monitor in batch:
            sequence += 1
            rows.append((f"{ts:013d}-{sequence:012d}", monitor, pollers[poller], ts, "up", 42,
                         "ok", META, ts))
        db.execute("BEGIN")
        db.executemany("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?)", rows)
        db.executemany(
            "INSERT INTO monitor_status VALUES (?,?,?,?,?,?,?) ON CONFLICT (monitor_id) DO "
            "UPDATE SET status = excluded.status, last_result_id = excluded.last_result_id, "
            "last_result_at = excluded.last_result_at, latency_ms = excluded.latency_ms",
            [(m, "up", pollers[poller], r[0], ts, 42, "ok") for m, r in zip(batch, rows)])
        db.executemany(
            "INSERT INTO alert_due VALUES (?,?,0) ON CONFLICT (monitor_id) DO UPDATE SET "
            "due_at = excluded.due_at", [(m, ts + 120_000) for m in batch])
        for resolution, width in (("hour", 3_600_000), ("day", 86_400_000)):
            db.executemany(
                "INSERT INTO rollups (monitor_id, region, resolution, bucket_start, up, total, "
                "latency_sum) VALUES (?,'',?,?,1,1,42) ON CONFLICT DO UPDATE SET up = up + 1, "
                "total = total + 1, latency_sum = latency_sum + 42",
                [(m, resolution, ts // width * width) for m in batch])
        db.execute("COMMIT")
        if MODE == "head":
            last = db.execute("SELECT max(rowid) FROM results").fetchone()[0]
            head.extend((m, ts, last - len(batch) + 1 + i) for i, m in enumerate(batch))

    def flush():
        head.sort()
        for start in range(0, len(head), CHUNK):
            db.execute("BEGIN")
            db.executemany("INSERT OR IGNORE INTO result_index VALUES (?,?,?)",
                           head[start:start + CHUNK])
            db.execute("COMMIT")
        head.clear()

    measured_from = MINUTES // 2
    for minute in range(MINUTES):
        if minute == measured_from:
            usage, io = resource.getrusage(resource.RUSAGE_SELF), io_counters()
        batches = [(p, monitors[p * per_poller + i: p * per_poller + i + BATCH])
                   for p in range(POLLERS) for i in range(0, per_poller, BATCH)]
        random.Random(minute).shuffle(batches)
        for k, (poller, batch) in enumerate(batches):
            upload(poller, batch, minute * 60_000 + k * 60_000 // len(batches))
        if MODE == "head" and (minute + 1) % FLUSH == 0:
            flush()
    after, io_after = resource.getrusage(resource.RUSAGE_SELF), io_counters()
    results = (MINUTES - measured_from) * MONITORS
    print(f"{MODE} ({MONITORS} monitors, {MINUTES} minutes): per result "
          f"user {1e6 * (after.ru_utime - usage.ru_utime) / results:.1f} us, "
          f"system {1e6 * (after.ru_stime - usage.ru_stime) / results:.1f} us, "
          f"{(io_after[0] - io[0]) / results:.1f} write calls "
          f"({(io_after[1] - io[1]) / results / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
