-- Which replica last tried to take or renew a lease. A replica that comes back from a restart
-- and finds itself the last to have looked knows that nobody watched while it was down: the
-- holding begins again, however short the outage (`seen_at` alone tells only outages longer
-- than the lapse).
ALTER TABLE leases ADD COLUMN seen_by TEXT NOT NULL DEFAULT '';
