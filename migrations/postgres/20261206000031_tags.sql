-- Tags (`shared_proto::tags`). A monitor's own list as written (a JSON array, for its views),
-- and a row per tag and monitor for what targets a tag: the list filter, maintenance windows,
-- notification channels, pause and resume by tag; each reads the monitors of a tag through
-- the primary key, never every monitor.
ALTER TABLE monitors ADD COLUMN tags TEXT;
CREATE TABLE monitor_tags (
    tag        TEXT NOT NULL,
    monitor_id TEXT NOT NULL,
    PRIMARY KEY (tag, monitor_id)
);
CREATE INDEX monitor_tags_monitor ON monitor_tags (monitor_id);
-- The tags a maintenance window covers, and those a notification channel is told of (JSON
-- arrays).
ALTER TABLE maintenance_windows ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE notification_channels ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
