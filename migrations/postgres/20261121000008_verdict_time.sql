-- The up/down verdict and the newest result are tracked apart: a late up/down result (an agent
-- that was cut off uploads it after a newer rate-limited one) still sets the verdict if it is the
-- newest verdict by check time, and a newer rate-limited result never hides it.
ALTER TABLE monitor_status ADD COLUMN verdict_at BIGINT;
ALTER TABLE monitor_status ADD COLUMN verdict_result_id TEXT;
UPDATE monitor_status SET verdict_at = last_result_at, verdict_result_id = last_result_id
    WHERE status <> 'rate_limited';
