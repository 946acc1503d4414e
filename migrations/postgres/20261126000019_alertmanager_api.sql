-- The fields only some channel kinds have (further Alertmanager instances, a webhook's body
-- format), as one JSON object.
ALTER TABLE notification_channels ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
-- Firing Alertmanager alerts are sent again while they last: the told problems are found
-- through these, at a cost that follows the problems, not the monitors or the history.
CREATE INDEX alert_state_notified ON alert_state (notified_status);
CREATE INDEX notifications_poller ON notifications (poller_id, created_at);
