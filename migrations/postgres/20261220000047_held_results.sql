-- Results a poller keeps because central refused them (issue 70): agents no longer delete a
-- refused result, they hold it and offer it again; the count arrives with each heartbeat and
-- is shown beside the poller. Expand-only: an older central ignores the column.
ALTER TABLE pollers ADD COLUMN held_results BIGINT NOT NULL DEFAULT 0;
