-- Dependencies reported by `health-json` monitors (`store::dependencies`). A row per monitor,
-- location (`region`, '' for a monitor checked from one place) and reported name, written
-- only when what it says changes (state, error, contact, details), so a steady document costs
-- no row writes. `changed_at`: the check time of the result that moved it to `state`.
-- `told`: 1 while a `dependency.down` was told and its `dependency.up` not yet.
CREATE TABLE dependencies (
    monitor_id TEXT NOT NULL,
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    state      TEXT NOT NULL,
    error      TEXT,
    contact    TEXT,
    details    TEXT,
    changed_at BIGINT NOT NULL,
    told       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (monitor_id, region, name)
);
-- `GET /api/v1/dependencies` groups by name (through aliases).
CREATE INDEX dependencies_by_name ON dependencies (name);
-- What the newest document of a monitor's location said beside its dependencies: its check
-- time (older documents uploaded late move nothing), the result it came from (latencies are
-- read from it) and the warnings of its mapping.
CREATE TABLE dependency_sources (
    monitor_id  TEXT NOT NULL,
    region      TEXT NOT NULL,
    reported_at BIGINT NOT NULL,
    result_id   TEXT NOT NULL,
    warnings    TEXT,
    PRIMARY KEY (monitor_id, region)
);
-- Each change of a dependency's state, and each new error while it stays unhealthy (the
-- error history, deduplicated: an unchanged error is not recorded again). `kind`: `appeared`,
-- `changed`, `error`, `gone`. `notice`: `dependency.down`/`dependency.up` while a notice
-- the change calls for is not yet in the outbox (`service::dependencies::notices`).
CREATE TABLE dependency_events (
    id         TEXT PRIMARY KEY,
    monitor_id TEXT NOT NULL,
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    state      TEXT NOT NULL,
    error      TEXT,
    previous   TEXT,
    notice     TEXT
);
-- The notices to send: an empty index costs nothing to read.
CREATE INDEX dependency_events_notice ON dependency_events (at) WHERE notice IS NOT NULL;
CREATE INDEX dependency_events_of ON dependency_events (monitor_id, at);
-- Pruning takes the oldest.
CREATE INDEX dependency_events_age ON dependency_events (at);
-- Operators' aliases: a reported name that stands for a canonical dependency.
CREATE TABLE dependency_aliases (
    alias      TEXT PRIMARY KEY,
    canonical  TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX dependency_aliases_canonical ON dependency_aliases (canonical);
-- Latency per dependency, in hour and day buckets (UTC), added to with each document.
CREATE TABLE dependency_latency (
    monitor_id   TEXT NOT NULL,
    region       TEXT NOT NULL,
    name         TEXT NOT NULL,
    resolution   TEXT NOT NULL,
    bucket_start BIGINT NOT NULL,
    count        BIGINT NOT NULL,
    sum_ms       DOUBLE PRECISION NOT NULL,
    min_ms       DOUBLE PRECISION NOT NULL,
    max_ms       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (monitor_id, region, name, resolution, bucket_start)
);
CREATE INDEX dependency_latency_age ON dependency_latency (resolution, bucket_start);
