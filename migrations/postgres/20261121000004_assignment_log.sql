-- Which pollers' assignments each version touched, so that a poller can fetch only what
-- changed since the version it has. The current monitors table says what the change was.
CREATE TABLE assignment_log (
    version    BIGINT NOT NULL,
    poller_id  TEXT NOT NULL,
    monitor_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX assignment_log_poller_version ON assignment_log (poller_id, version);
CREATE INDEX assignment_log_created ON assignment_log (created_at);

-- Versions at or below this were compacted away: asking for a delta from there gets the full set.
ALTER TABLE assignment_state ADD COLUMN log_floor BIGINT NOT NULL DEFAULT 0;
