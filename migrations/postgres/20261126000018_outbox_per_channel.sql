-- Each channel's queue is read on its own, oldest first: the index matches that query's
-- filter and order exactly (status, channel_id, then created_at, id).
DROP INDEX notifications_pending;
CREATE INDEX notifications_pending ON notifications (status, channel_id, created_at, id);
