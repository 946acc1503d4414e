-- Uptime is time: each bucket keeps how many milliseconds the results stood for up and for
-- down (a result stands for the time until the next one of its monitor or location, at most
-- interval + staleness grace). Buckets written before this migration have no time: their
-- span counts as unmeasured (it is neither up nor down), while their check counts stay. A
-- monitor keeps when it was last paused and resumed, so that a pause cuts its newest result's
-- span short.
ALTER TABLE rollups ADD COLUMN up_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rollups ADD COLUMN down_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE monitors ADD COLUMN paused_at BIGINT;
ALTER TABLE monitors ADD COLUMN resumed_at BIGINT;
UPDATE monitors SET paused_at = updated_at WHERE paused <> 0;
