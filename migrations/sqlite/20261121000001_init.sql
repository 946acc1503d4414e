-- Central schema, SQLite flavour. Times are milliseconds since the Unix epoch (UTC);
-- ids are UUID strings; flags are 0/1 integers, so the same queries run on PostgreSQL.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE registration_tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    region      TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    max_uses    BIGINT NOT NULL,
    uses        BIGINT NOT NULL DEFAULT 0,
    revoked_at  BIGINT
);

CREATE TABLE pollers (
    id                    TEXT PRIMARY KEY,
    name                  TEXT NOT NULL,
    alias                 TEXT,
    region                TEXT,
    datacenter            TEXT,
    capabilities          TEXT NOT NULL,
    version               TEXT,
    enabled               BIGINT NOT NULL DEFAULT 1,
    registration_token_id TEXT,
    created_at            BIGINT NOT NULL,
    last_heartbeat_at     BIGINT,
    last_upload_at        BIGINT,
    queue_depth           BIGINT NOT NULL DEFAULT 0,
    oldest_queued_at      BIGINT,
    dropped_results       BIGINT NOT NULL DEFAULT 0,
    assignment_version    BIGINT,
    deleted_at            BIGINT
);

CREATE TABLE refresh_tokens (
    id          TEXT PRIMARY KEY,
    poller_id   TEXT NOT NULL REFERENCES pollers(id),
    family_id   TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    spent_at    BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_poller ON refresh_tokens (poller_id);

CREATE TABLE monitors (
    id                 TEXT PRIMARY KEY,
    name               TEXT NOT NULL,
    kind               TEXT NOT NULL,
    target             TEXT NOT NULL,
    interval_ms        BIGINT NOT NULL,
    timeout_ms         BIGINT NOT NULL,
    settings           TEXT NOT NULL,
    poller_mode        TEXT NOT NULL,
    poller_id          TEXT,
    poller_region      TEXT,
    poller_datacenter  TEXT,
    poller_capability  TEXT,
    failover           BIGINT,
    paused             BIGINT NOT NULL DEFAULT 0,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    -- assignment version at which the spec last changed
    revision           BIGINT NOT NULL,
    assigned_poller_id TEXT,
    -- the poller that had it before, accepted as a result source for a grace window
    previous_poller_id TEXT,
    assigned_at        BIGINT,
    placement_reason   TEXT
);
CREATE INDEX monitors_assigned ON monitors (assigned_poller_id);
CREATE INDEX monitors_created ON monitors (created_at, id);

CREATE TABLE monitor_status (
    monitor_id     TEXT PRIMARY KEY,
    status         TEXT NOT NULL,
    poller_id      TEXT NOT NULL,
    last_result_id TEXT NOT NULL,
    last_result_at BIGINT NOT NULL,
    latency_ms     BIGINT,
    message        TEXT NOT NULL
);

CREATE TABLE results (
    id          TEXT PRIMARY KEY,
    monitor_id  TEXT NOT NULL,
    poller_id   TEXT NOT NULL,
    ts          BIGINT NOT NULL,
    status      TEXT NOT NULL,
    latency_ms  BIGINT,
    msg         TEXT NOT NULL,
    meta        TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX results_monitor_ts ON results (monitor_id, ts, id);

CREATE TABLE assignment_state (
    id      BIGINT PRIMARY KEY,
    version BIGINT NOT NULL
);
INSERT INTO assignment_state (id, version) VALUES (1, 1);
