-- What agents' polling engines report: a health snapshot per poller (with each heartbeat),
-- their state-change events, and when each monitor's next check is due.

ALTER TABLE pollers ADD COLUMN scheduler_health TEXT;
ALTER TABLE monitor_status ADD COLUMN next_due_at BIGINT;

CREATE TABLE engine_events (
    id          TEXT PRIMARY KEY,
    poller_id   TEXT NOT NULL,
    monitor_id  TEXT NOT NULL,
    at          BIGINT NOT NULL,
    event       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    next_due_at BIGINT
);
CREATE INDEX engine_events_poller_at ON engine_events (poller_id, at, id);
CREATE INDEX engine_events_monitor_at ON engine_events (monitor_id, at, id);
