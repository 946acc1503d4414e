-- The newest problem a poller reported in a heartbeat, and when: it is `degraded` meanwhile.
ALTER TABLE pollers ADD COLUMN last_error TEXT;
ALTER TABLE pollers ADD COLUMN last_error_at BIGINT;
