-- A look that finds a monitor steady (one place, showing its confirmed verdict, nothing held)
-- says so in its row: a result that only confirms that verdict then moves the row's instant
-- itself, in ingest's transaction (to the earlier of `rule_at` and the instant that result
-- could first go overdue), instead of marking the monitor due for a look that would find
-- nothing new. `rule_at`: when the alert rules alone could tell something (a reminder, a
-- notice held for flapping let go). `steady` holds the interval (ms) the look saw, 0 when not
-- steady: a confirmation worked out with another interval, or reaching a row already due, is
-- marked as before. Any mark clears `steady`; only a look sets it.
ALTER TABLE alert_due ADD COLUMN steady BIGINT NOT NULL DEFAULT 0;
ALTER TABLE alert_due ADD COLUMN rule_at BIGINT;
