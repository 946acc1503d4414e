-- Planned maintenance (`service::maintenance`): one-off (`ends_at`) or recurring (`rule`,
-- `time_zone`, `duration_ms`), over the monitors, pollers and regions named (JSON arrays).
CREATE TABLE maintenance_windows (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    starts_at   BIGINT NOT NULL,
    ends_at     BIGINT,
    rule        TEXT,
    time_zone   TEXT,
    duration_ms BIGINT,
    -- When its last occurrence ends; NULL while it recurs without end. Status reads only the
    -- windows not over yet.
    until_at    BIGINT,
    monitor_ids TEXT NOT NULL,
    poller_ids  TEXT NOT NULL,
    regions     TEXT NOT NULL,
    notify      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX maintenance_windows_until ON maintenance_windows (until_at);
CREATE INDEX maintenance_windows_created ON maintenance_windows (created_at, id);
