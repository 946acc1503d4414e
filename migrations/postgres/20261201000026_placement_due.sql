-- Pollers whose change the lease holder must place monitors for (`store::placement_due`):
-- requests and liveness queue a poller instead of placing every monitor themselves.
-- `reach`: `own` (it can only lose the monitors it runs) or `could` (it may take some).
-- `marks` counts queueings: a pass removes a row only if nobody queued it again meanwhile.
CREATE TABLE placement_due (
    poller_id TEXT PRIMARY KEY,
    reach     TEXT NOT NULL,
    marks     BIGINT NOT NULL DEFAULT 1,
    queued_at BIGINT NOT NULL
);
-- What a pass for a poller that may take monitors reads besides the ones it runs.
CREATE INDEX monitors_pinned ON monitors (poller_id);
CREATE INDEX monitors_mode_region ON monitors (poller_mode, poller_region);
CREATE INDEX monitor_locations_region ON monitor_locations (region);
