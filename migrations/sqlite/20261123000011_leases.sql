-- Duties that must run on one replica at a time (liveness and failover, compaction, pruning)
-- run on the holder of a lease: a row per duty, renewed by its holder before it expires and
-- taken over by another replica once it has.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
