-- The status each location of a multi-location monitor showed at alerting's last look, as
-- `monitors.shown_status` is the monitor's: `/metrics` renders both from the stored rows
-- instead of deriving every monitor per scrape. NULL until the first look.
ALTER TABLE monitor_locations ADD COLUMN shown_status TEXT;
-- Every multi-location monitor is looked at once after the upgrade.
INSERT INTO alert_due (monitor_id, due_at, marks)
    SELECT DISTINCT monitor_id, 0, 1 FROM monitor_locations WHERE true
    ON CONFLICT (monitor_id) DO UPDATE SET due_at = 0, marks = alert_due.marks + 1;
