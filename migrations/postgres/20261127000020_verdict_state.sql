-- A confirmed verdict is stored state, moved by each result in check-time order, not a window
-- of recent results: `confirmed` (up/down, NULL while none is confirmed) and `run_length`, how
-- many results equal to `status` (the newest verdict) end the sequence. Existing rows start
-- from what alerting last saw confirmed (its `alert_state`, when up or down), else from their
-- newest verdict, with a run of one: a change that was half confirmed when this ran keeps the
-- verdict before it and needs its confirmations again.
ALTER TABLE monitor_status ADD COLUMN confirmed TEXT;
ALTER TABLE monitor_status ADD COLUMN run_length BIGINT NOT NULL DEFAULT 0;
ALTER TABLE location_status ADD COLUMN confirmed TEXT;
ALTER TABLE location_status ADD COLUMN run_length BIGINT NOT NULL DEFAULT 0;
UPDATE monitor_status SET
    confirmed = COALESCE(
        (SELECT a.status FROM alert_state a
         WHERE a.monitor_id = monitor_status.monitor_id AND a.status IN ('up', 'down')),
        CASE WHEN status IN ('up', 'down') THEN status END),
    run_length = CASE WHEN status IN ('up', 'down') THEN 1 ELSE 0 END;
UPDATE location_status SET confirmed = status, run_length = 1 WHERE status IN ('up', 'down');
