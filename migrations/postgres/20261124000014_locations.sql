-- Multi-location monitors: the regions a monitor runs in (JSON array) and its quorum; where each
-- location runs now (as monitors' own columns do for a single-location monitor); the newest
-- result and verdict of each location; and the location each result was checked from.
ALTER TABLE monitors ADD COLUMN poller_regions TEXT;
ALTER TABLE monitors ADD COLUMN quorum BIGINT;

CREATE TABLE monitor_locations (
    monitor_id         TEXT NOT NULL,
    region             TEXT NOT NULL,
    assigned_poller_id TEXT,
    previous_poller_id TEXT,
    assigned_at        BIGINT,
    placement_reason   TEXT,
    PRIMARY KEY (monitor_id, region)
);
CREATE INDEX monitor_locations_assigned ON monitor_locations (assigned_poller_id);
CREATE INDEX monitor_locations_previous ON monitor_locations (previous_poller_id);

CREATE TABLE location_status (
    monitor_id        TEXT NOT NULL,
    region            TEXT NOT NULL,
    status            TEXT NOT NULL,
    poller_id         TEXT NOT NULL,
    last_result_id    TEXT NOT NULL,
    last_result_at    BIGINT NOT NULL,
    latency_ms        BIGINT,
    message           TEXT NOT NULL,
    next_due_at       BIGINT,
    verdict_at        BIGINT,
    verdict_result_id TEXT,
    PRIMARY KEY (monitor_id, region)
);

ALTER TABLE results ADD COLUMN region TEXT;
