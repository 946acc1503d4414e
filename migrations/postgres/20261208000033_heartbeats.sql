-- Heartbeat (push) monitors (`service::push`). A row per heartbeat monitor: its ping token's
-- SHA-256 (a ping is one indexed read by it), when its job last said it started and last
-- pinged, when its schedule last changed (its clock starts again then), and how many pings it
-- had (which slot of the ring the next one takes).
CREATE TABLE heartbeats (
    monitor_id   TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL,
    started_at   BIGINT,
    last_ping_at BIGINT,
    schedule_at  BIGINT,
    pings        BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX heartbeats_token ON heartbeats (token_sha256);
-- The newest pings of each heartbeat monitor: a ring of `service::push::KEPT_PINGS`
-- slots, so a job pinging every second costs a bounded number of rows.
CREATE TABLE heartbeat_pings (
    monitor_id TEXT NOT NULL,
    slot       BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    method     TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (monitor_id, slot)
);
