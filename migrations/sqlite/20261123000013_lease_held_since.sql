-- Since when a lease has been held with some replica around: `seen_at` is the last time any
-- replica tried to take or renew it, `held_since` when the current unbroken run began. For the
-- `duties` lease that is since when central (some replica of it) has been up without
-- interruption: a poller is only called offline once it has been silent that long, so a
-- central outage never makes pollers look offline when central comes back.
ALTER TABLE leases ADD COLUMN held_since BIGINT NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN seen_at BIGINT NOT NULL DEFAULT 0;
