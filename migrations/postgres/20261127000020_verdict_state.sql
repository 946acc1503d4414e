-- A confirmed verdict is stored state, moved by each result in check-time order, not a window
-- of recent results: `confirmed` (up/down, NULL while none is confirmed) and `run_length`, how
-- many results equal to `status` (the newest verdict) end the sequence. Existing rows start
-- from their newest verdict, as if it were confirmed by a run of one: a change that was half
-- confirmed when this ran needs its confirmations again.
ALTER TABLE monitor_status ADD COLUMN confirmed TEXT;
ALTER TABLE monitor_status ADD COLUMN run_length BIGINT NOT NULL DEFAULT 0;
ALTER TABLE location_status ADD COLUMN confirmed TEXT;
ALTER TABLE location_status ADD COLUMN run_length BIGINT NOT NULL DEFAULT 0;
UPDATE monitor_status SET confirmed = status, run_length = 1 WHERE status IN ('up', 'down');
UPDATE location_status SET confirmed = status, run_length = 1 WHERE status IN ('up', 'down');
