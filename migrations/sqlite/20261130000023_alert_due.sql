-- When alerting must look at each monitor next: a change to what its status depends on (a
-- result, an edit, a move, its poller going offline) marks it due now; a look sets the instant
-- its status or alert state could next change with time alone (overdue results, a reminder, a
-- hold ending), or removes the row when none can. Alerting reads only rows due by now, through
-- the index, so its work follows what changes rather than how many monitors exist.
-- `marks` counts the marks: a look writes its result only if no mark came in meanwhile.
CREATE TABLE alert_due (
    monitor_id TEXT PRIMARY KEY,
    due_at     BIGINT NOT NULL,
    marks      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX alert_due_at ON alert_due (due_at);
-- A new lease holder looks again at the monitors alerting last saw stale.
CREATE INDEX alert_state_status ON alert_state (status);
-- The status each monitor showed at alerting's last look: what `?status=` lists by, through
-- its index, instead of deriving every monitor per request. Set by each look that finds it
-- changed (a new monitor starts `pending`, or `paused`).
ALTER TABLE monitors ADD COLUMN shown_status TEXT;
CREATE INDEX monitors_shown_status ON monitors (shown_status, created_at, id);
-- Every monitor is looked at once after the upgrade.
INSERT INTO alert_due (monitor_id, due_at, marks) SELECT id, 0, 1 FROM monitors;
