-- Poller liveness as last recorded, and every change of it with its time.
ALTER TABLE pollers ADD COLUMN status TEXT;
ALTER TABLE pollers ADD COLUMN status_since BIGINT;

CREATE TABLE poller_status_changes (
    id        TEXT PRIMARY KEY,
    poller_id TEXT NOT NULL,
    status    TEXT NOT NULL,
    at        BIGINT NOT NULL
);
CREATE INDEX poller_status_changes_poller ON poller_status_changes (poller_id, at, id);
